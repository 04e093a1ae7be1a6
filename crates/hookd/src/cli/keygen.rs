//! `hookd keygen`: makes a new endpoint secret or ed25519 key pair from the OS random number
//! generator, in the text forms hookd and receivers read.

use std::process::ExitCode;

use webhook_signature::{Ed25519SecretKey, Secret};

/// Print a new whsec_ secret, or with --asymmetric a `secret: whsk_…` and a `public: whpk_…`
/// line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Make an ed25519 key pair (v1a signatures) instead of an HMAC secret (v1).
    #[arg(long)]
    asymmetric: bool,
}

pub fn run(args: Args) -> ExitCode {
    if args.asymmetric {
        let key = Ed25519SecretKey::generate();
        println!("secret: {key}");
        println!("public: {}", key.public_key());
    } else {
        println!("{}", Secret::generate());
    }
    ExitCode::SUCCESS
}
