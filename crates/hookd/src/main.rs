//! The `hookd` binary: the webhook delivery server and its command-line tools.
//!
//! # Layout
//! - `cli`: one module per subcommand (`serve`'s parts beside it: `database`, `delivery`,
//!   `master_key`, `metrics`, `clock`, `shutdown`); `main` only parses arguments and
//!   dispatches.

mod cli;

use clap::Parser;

// Every delivery allocates and frees many small buffers on several threads at once; glibc's
// malloc and free took about a fifth of hookd's CPU samples, mimalloc takes about a tenth
// (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::Cli::parse().run()
}
