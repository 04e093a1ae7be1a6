//! Command-line interface: argument definitions and dispatch to one module per subcommand.

mod clock;
mod config;
mod database;
mod delivery;
mod hosts;
mod keygen;
mod listen;
mod log_fields;
mod master_key;
mod metrics;
mod migrate;
mod notices;
mod outbox;
mod retention;
mod sealed_sources;
mod serve;
mod shutdown;
mod sign;
mod token;
mod traces;
mod verify;

use std::fmt::Display;
use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use config::Sources;

/// hookd: a self-hosted webhook delivery server.
#[derive(Debug, Parser)]
#[command(name = "hookd", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server: the API over durable storage.
    Serve(Box<serve::Args>),
    /// Apply pending database migrations and exit.
    Migrate(migrate::Args),
    Sign(sign::Args),
    Verify(verify::Args),
    Keygen(keygen::Args),
    Listen(listen::Args),
    /// Create, list and revoke API tokens (on the database, without the server).
    Token(token::Args),
    /// Make a master key, or rotate the master key that seals endpoint secrets at rest.
    MasterKey(master_key::Args),
    /// Outbox tables in producers' own databases (outbox sources).
    Outbox(outbox::Args),
    /// Show serve's configuration (command line, environment, --config file, defaults).
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the configuration `serve` would run with, as TOML, and where each value came
    /// from; secrets masked. Takes serve's options.
    Show(Box<serve::Args>),
}

impl Cli {
    /// Parses the process's arguments (with `--config`'s file merged in) and runs the command.
    pub fn main() -> ExitCode {
        match config::parse::<Self>(std::env::args_os().collect()) {
            Ok((cli, sources)) => cli.run(&sources),
            Err(message) => usage_error(message),
        }
    }

    fn run(self, sources: &Sources) -> ExitCode {
        match self.command {
            Command::Config(ConfigCommand::Show(_)) => {
                print!("{}", sources.show());
                ExitCode::SUCCESS
            }
            Command::Serve(args) => serve::run(*args),
            Command::Migrate(args) => migrate::run(args),
            Command::Sign(args) => sign::run(args),
            Command::Verify(args) => verify::run(args),
            Command::Keygen(args) => keygen::run(args),
            Command::Listen(args) => listen::run(args),
            Command::Token(args) => token::run(args),
            Command::MasterKey(args) => master_key::run(args),
            Command::Outbox(args) => outbox::run(args),
        }
    }
}

/// Reports bad arguments or input and returns exit code 2, as clap does for usage errors.
fn usage_error(message: impl Display) -> ExitCode {
    print_error(message);
    ExitCode::from(2)
}

/// Writes `error: …` to stderr, with the secrets of any URL in it masked (a database URL's
/// password, quoted back by a parser or a driver).
fn print_error(message: impl Display) {
    eprintln!("error: {}", error_text(message));
}

/// `message` as hookd writes an error, with the secrets of any URL in it masked.
fn error_text(message: impl Display) -> String {
    hookd_core::redact::urls_in(&message.to_string())
}

/// Reads the message body, all of stdin, as raw bytes.
fn read_body() -> Result<Vec<u8>, ExitCode> {
    let mut body = Vec::new();
    std::io::stdin()
        .read_to_end(&mut body)
        .map_err(|err| usage_error(format_args!("cannot read the body from stdin: {err}")))?;
    Ok(body)
}
