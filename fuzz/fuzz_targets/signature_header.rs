//! The `webhook-signature` entry parser and the whole verifier on arbitrary header values must
//! never panic. Input: id, timestamp and signature values separated by newlines, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_signature::{Ed25519SecretKey, Secret, SigningKey, Verifier, VerifyingKey, header};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\n');
    let (id, timestamp, signature) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let body = parts.next().unwrap_or("").as_bytes();
    for entry in header::entries(signature) {
        let _ = entry.decode();
    }
    let verifier = Verifier::with_keys([
        VerifyingKey::Hmac(Secret::from_bytes(*b"0123456789abcdef01234567")),
        VerifyingKey::from(SigningKey::Ed25519(Ed25519SecretKey::from_seed([9; 32]))),
    ]);
    let headers = [
        (header::ID, id),
        (header::TIMESTAMP, timestamp),
        (header::SIGNATURE, signature),
    ];
    let _ = verifier.verify(body, headers);
    let _ = VerifyingKey::parse(signature);
});
