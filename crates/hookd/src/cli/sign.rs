//! `hookd sign`: signs a body read from stdin exactly as hookd signs deliveries, to test a
//! receiver by hand.

use std::process::ExitCode;

use webhook_signature::{Signer, SigningKey, clock};

use super::{read_body, usage_error};

/// Sign a message body read from stdin; print its webhook-signature value.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Signing key: whsec_… (v1, HMAC) or whsk_… (v1a, ed25519). Repeat for one entry per key,
    /// as during a rotation.
    #[arg(long = "secret", value_name = "KEY", required = true)]
    secrets: Vec<SigningKey>,
    /// Message id (webhook-id); must not contain '.'.
    #[arg(long)]
    id: String,
    /// Unix seconds (webhook-timestamp) [default: now]
    #[arg(long)]
    timestamp: Option<u64>,
    /// Print all three headers as `name: value` lines instead of the signature alone.
    #[arg(long)]
    headers: bool,
}

pub fn run(args: Args) -> ExitCode {
    let body = match read_body() {
        Ok(body) => body,
        Err(code) => return code,
    };
    let timestamp = args.timestamp.unwrap_or_else(clock::unix_now);
    match Signer::new(args.secrets).headers(&args.id, timestamp, &body) {
        Ok(headers) if args.headers => {
            for (name, value) in headers.pairs() {
                println!("{name}: {value}");
            }
        }
        Ok(headers) => println!("{}", headers.signature),
        Err(err) => return usage_error(err),
    }
    ExitCode::SUCCESS
}
