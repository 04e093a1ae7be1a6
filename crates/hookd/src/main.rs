//! The `hookd` binary: the webhook delivery server and its command-line tools.
//!
//! # Layout
//! - `cli`: one module per subcommand (`serve`'s parts beside it: `database`, `delivery`,
//!   `master_key`, `metrics`, `clock`); `main` only parses arguments and dispatches.

mod cli;

use clap::Parser;

/// mimalloc rather than the system allocator: hookd allocates and frees many small buffers per
/// request and per attempt, from several threads; glibc's malloc and free took about 15 % of
/// hookd's CPU in a delivery profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::Cli::parse().run()
}
