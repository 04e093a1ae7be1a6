//! The `hookd` binary: the webhook delivery server and its command-line tools.
//!
//! # Layout
//! - `cli`: one module per subcommand (`serve`'s parts beside it: `database`, `delivery`,
//!   `master_key`, `metrics`, `clock`); `main` only parses arguments and dispatches.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    cli::Cli::parse().run()
}
