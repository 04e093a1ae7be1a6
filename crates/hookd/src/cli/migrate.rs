//! `hookd migrate`: applies pending schema migrations and exits (`serve` also does this at
//! start; this is for deployments that migrate before rolling out).

use std::process::ExitCode;

use super::database::{Database, runtime};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    database: Database,
}

pub fn run(args: Args) -> ExitCode {
    match runtime().block_on(args.database.open()) {
        Ok(_) => {
            println!("database {} is up to date", args.database.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            super::print_error(format_args!("{error:#}"));
            ExitCode::FAILURE
        }
    }
}
