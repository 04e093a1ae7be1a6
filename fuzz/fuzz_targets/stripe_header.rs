//! The `Stripe-Signature` parser and verifier on arbitrary header values must never panic.
//! Input: the header value, a newline, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_signature::{TimeWindow, github, stripe};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (header, body) = text.split_once('\n').unwrap_or((&text, ""));
    let _ = stripe::StripeHeader::parse(header);
    let _ = stripe::verify(
        "whsec_secret",
        header,
        body.as_bytes(),
        &TimeWindow::default(),
    );
    let _ = github::verify("secret", header, body.as_bytes());
});
