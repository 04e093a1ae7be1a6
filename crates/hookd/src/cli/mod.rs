//! Command-line interface: argument definitions and dispatch to one module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// hookd: a self-hosted webhook delivery server.
#[derive(Debug, Parser)]
#[command(name = "hookd", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {}

impl Cli {
    pub fn run(self) -> ExitCode {
        match self.command {}
    }
}
