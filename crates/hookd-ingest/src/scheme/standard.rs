//! Standard Webhooks and Svix: `v1` HMAC or `v1a` ed25519 over `{id}.{timestamp}.{body}`, under
//! the `webhook-*` header names or Svix's older `svix-*` ones (Svix-powered senders send those).

use webhook_signature::{Verifier, VerifyingKey, WebhookHeaders, header};

use crate::body::Envelope;
use crate::{Accepted, ConfigError, InboundRequest, Rejection};

/// The three header names under one naming.
struct Names {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const STANDARD: Names = Names {
    id: header::ID,
    timestamp: header::TIMESTAMP,
    signature: header::SIGNATURE,
};

const SVIX: Names = Names {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// `config.secret` as a key: `whsec_…` (HMAC, `v1`) or `whpk_…` (ed25519 public key, `v1a`).
pub(super) fn key(text: &str) -> Result<VerifyingKey, ConfigError> {
    VerifyingKey::parse(text).map_err(|error| ConfigError::new("config.secret", error.to_string()))
}

pub(super) fn verify(
    key: &VerifyingKey,
    req: &InboundRequest<'_>,
    kind: &str,
) -> Result<Accepted, Rejection> {
    let svix_only =
        !req.headers.contains_key(STANDARD.signature) && req.headers.contains_key(SVIX.signature);
    let names = if svix_only { SVIX } else { STANDARD };
    let found = WebhookHeaders {
        id: req.required(names.id)?.to_owned(),
        timestamp: req.required(names.timestamp)?.to_owned(),
        signature: req.required(names.signature)?.to_owned(),
    };
    Verifier::new(key.clone())
        .now(req.now())
        .verify_headers(req.body, &found)?;
    Ok(Accepted::event(
        Some(&found.id),
        Envelope::read(req.body).kind(),
        kind,
    ))
}
