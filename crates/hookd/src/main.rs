//! The `hookd` binary: the webhook delivery server and its command-line tools.
//!
//! # Layout
//! - `cli`: one module per subcommand (`serve`'s parts beside it: `database`, `delivery`,
//!   `master_key` (with `sealed_sources`, the ingest sources' re-sealing), `metrics`,
//!   `retention`, `notices`, `traces`, `clock`, `shutdown`; `outbox` is both `serve`'s
//!   outbox sources and `hookd outbox install`; `config` merges a `--config` file into the
//!   arguments); `main` only hands over to it.
//! - `allocator`: mimalloc as the global allocator, without transparent huge pages.
//! - `sqlite_memory`: SQLite allocating through mimalloc, as the rest of hookd does.

mod allocator;
mod cli;
mod sqlite_memory;

fn main() -> std::process::ExitCode {
    allocator::configure();
    sqlite_memory::configure();
    cli::Cli::main()
}
