//! `hookd verify`: checks a received webhook (body on stdin, header values as arguments) the
//! way a receiver should, and says which check failed.

use std::process::ExitCode;

use webhook_signature::{Verifier, VerifyingKey, WebhookHeaders, clock};

use super::read_body;

/// Verify a message body read from stdin; print `valid` (exit 0) or why not (exit 1).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Key to verify with: whsec_… for v1 entries, whpk_… (or whsk_…) for v1a entries. Repeat
    /// to accept a signature by any of several keys.
    #[arg(long = "secret", value_name = "KEY", required = true)]
    secrets: Vec<VerifyingKey>,
    /// The webhook-id value received.
    #[arg(long)]
    id: String,
    /// The webhook-timestamp value received.
    #[arg(long)]
    timestamp: String,
    /// The webhook-signature value received.
    #[arg(long)]
    signature: String,
    /// Unix seconds to treat as now [default: the system clock]
    #[arg(long)]
    now: Option<u64>,
    /// Seconds the timestamp may be from now, in either direction.
    #[arg(long, value_name = "SECS", default_value_t = clock::DEFAULT_TOLERANCE)]
    tolerance: u64,
}

pub fn run(args: Args) -> ExitCode {
    let body = match read_body() {
        Ok(body) => body,
        Err(code) => return code,
    };
    let mut verifier = Verifier::with_keys(args.secrets).tolerance(args.tolerance);
    if let Some(now) = args.now {
        verifier = verifier.now(now);
    }
    let headers = WebhookHeaders {
        id: args.id,
        timestamp: args.timestamp,
        signature: args.signature,
    };
    match verifier.verify_headers(&body, &headers) {
        Ok(()) => {
            println!("valid");
            ExitCode::SUCCESS
        }
        Err(err) => {
            println!("invalid: {err}");
            ExitCode::FAILURE
        }
    }
}
