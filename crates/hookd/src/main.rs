//! The `hookd` binary: the webhook delivery server and its command-line tools.
//!
//! # Layout
//! - `cli`: one module per subcommand (`serve`'s parts beside it: `database`, `delivery`,
//!   `master_key`, `metrics`, `retention`, `notices`, `traces`, `clock`, `shutdown`; `outbox`
//!   is both `serve`'s outbox sources and `hookd outbox install`; `config` merges a `--config`
//!   file into the arguments); `main` only hands over to it.
//! - `sqlite_memory`: SQLite allocating through mimalloc, as the rest of hookd does.

mod cli;
mod sqlite_memory;

// Every delivery allocates and frees many small buffers on several threads at once, which
// mimalloc does in about half the CPU of glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sqlite_memory::configure();
    cli::Cli::main()
}
