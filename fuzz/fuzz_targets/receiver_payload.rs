//! A receiver's whole path on an arbitrary body must never panic: the body is signed correctly
//! (Standard Webhooks and Stripe), so verification passes and the payload parsing behind it
//! runs: the Stripe event id read from the body, then the body parsed as JSON by the caller.
#![no_main]

use bytes::Bytes;
use hookd_receiver::WebhookVerifier;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use webhook_signature::{Secret, Signer, SigningKey, header, stripe};

const NOW: u64 = 1_700_000_000;
const STRIPE_SECRET: &str = "whsec_fuzz";

fuzz_target!(|data: &[u8]| {
    let body = Bytes::copy_from_slice(data);
    let key = SigningKey::Hmac(Secret::from_bytes(*b"0123456789abcdef01234567"));

    let signature = Signer::from(key.clone())
        .signature("msg_fuzz", NOW, data)
        .expect("an HMAC key always signs");
    let mut headers = HeaderMap::new();
    headers.insert(header::ID, HeaderValue::from_static("msg_fuzz"));
    headers.insert(header::TIMESTAMP, HeaderValue::from(NOW));
    headers.insert(header::SIGNATURE, value(&signature));
    let standard = WebhookVerifier::standard([key.into()]).now(NOW);
    let webhook = standard
        .verify(&headers, body.clone())
        .expect("signed correctly");
    let _ = webhook.json::<serde_json::Value>();

    let mut headers = HeaderMap::new();
    headers.insert(
        stripe::HEADER,
        value(&stripe::sign(STRIPE_SECRET, NOW, data)),
    );
    let stripe = WebhookVerifier::stripe([STRIPE_SECRET]).now(NOW);
    let webhook = stripe.verify(&headers, body).expect("signed correctly");
    let _ = webhook.json::<serde_json::Value>();
});

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("signatures are visible ASCII")
}
