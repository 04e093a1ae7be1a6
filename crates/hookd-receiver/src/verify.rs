//! Verification over the raw body, before anything parses it: one [`WebhookVerifier`] per
//! sender, holding every secret currently valid (several during a rotation) and the scheme the
//! sender signs with. Framework-free (it takes an `http::HeaderMap` and the body bytes), so the
//! axum extractor, the layer and `hookd listen` share it.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use serde::de::DeserializeOwned;
use webhook_signature::{TimeWindow, Verifier, VerifyError, VerifyingKey, clock, github, header};
use webhook_signature::{WebhookHeaders, stripe};

/// The header GitHub puts its delivery id in (the same on a redelivery).
pub const GITHUB_DELIVERY: &str = "x-github-delivery";

/// How a sender signs its webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature` (`v1` HMAC and `v1a` ed25519):
    /// hookd, Svix and every Standard Webhooks sender.
    StandardWebhooks,
    /// `Stripe-Signature: t=…,v1=<hex>`.
    Stripe,
    /// `X-Hub-Signature-256: sha256=<hex>` (no timestamp: deduplicate on `X-GitHub-Delivery`).
    GitHub,
}

/// A request that passed verification: its raw body and what identifies it.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// The scheme it was verified with.
    pub scheme: Scheme,
    /// The id to deduplicate on, the same on every retry: `webhook-id`, `X-GitHub-Delivery`,
    /// or the `id` of a Stripe event's body. `None` only when a GitHub or Stripe sender left
    /// it out.
    pub id: Option<String>,
    /// The signed unix timestamp of this attempt (none for GitHub).
    pub timestamp: Option<u64>,
    /// All request headers, as received.
    pub headers: HeaderMap,
    /// The body exactly as received; the signature covers these bytes.
    pub body: Bytes,
}

impl Webhook {
    /// Parses the (verified) body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// Verifies requests from one sender. Cheap to clone (shared inside).
#[derive(Debug, Clone)]
pub struct WebhookVerifier(Arc<Keys>);

#[derive(Debug, Clone)]
enum Keys {
    Standard(Verifier),
    Stripe(Vec<String>, TimeWindow),
    GitHub(Vec<String>),
}

impl WebhookVerifier {
    /// Standard Webhooks, accepting a signature by any of `keys` (`whsec_…` for `v1`,
    /// `whpk_…` for `v1a`), timestamps within ±300 s of the system clock.
    pub fn standard(keys: impl IntoIterator<Item = VerifyingKey>) -> Self {
        Self(Arc::new(Keys::Standard(Verifier::with_keys(keys))))
    }

    /// [`standard`](Self::standard) from key strings, e.g. the values of an environment
    /// variable; the first unreadable key is the error.
    pub fn standard_from_strs<S: AsRef<str>>(
        keys: impl IntoIterator<Item = S>,
    ) -> Result<Self, webhook_signature::KeyError> {
        let keys = keys
            .into_iter()
            .map(|key| VerifyingKey::parse(key.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::standard(keys))
    }

    /// Stripe's scheme with any of `secrets` (the whole `whsec_…` strings), ±300 s both ways.
    pub fn stripe<S: Into<String>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let secrets = secrets.into_iter().map(Into::into).collect();
        Self(Arc::new(Keys::Stripe(secrets, TimeWindow::default())))
    }

    /// GitHub's scheme with any of `secrets`.
    pub fn github<S: Into<String>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let secrets = secrets.into_iter().map(Into::into).collect();
        Self(Arc::new(Keys::GitHub(secrets)))
    }

    /// The scheme this verifier checks.
    pub fn scheme(&self) -> Scheme {
        match *self.0 {
            Keys::Standard(_) => Scheme::StandardWebhooks,
            Keys::Stripe(..) => Scheme::Stripe,
            Keys::GitHub(_) => Scheme::GitHub,
        }
    }

    /// Accepts timestamps up to `seconds` from now in either direction (default
    /// [`clock::DEFAULT_TOLERANCE`]); GitHub signs no timestamp, so it has no effect there.
    pub fn tolerance(self, seconds: u64) -> Self {
        self.map_window(|v| v.tolerance(seconds), |w| w.tolerance(seconds))
    }

    /// Treats `unix_seconds` as now instead of the system clock (tests, replaying a capture).
    pub fn now(self, unix_seconds: u64) -> Self {
        self.map_window(|v| v.now(unix_seconds), |w| w.now(unix_seconds))
    }

    fn map_window(
        mut self,
        verifier: impl FnOnce(Verifier) -> Verifier,
        window: impl FnOnce(TimeWindow) -> TimeWindow,
    ) -> Self {
        let keys = Arc::make_mut(&mut self.0);
        *keys = match keys.clone() {
            Keys::Standard(v) => Keys::Standard(verifier(v)),
            Keys::Stripe(secrets, w) => Keys::Stripe(secrets, window(w)),
            github @ Keys::GitHub(_) => github,
        };
        self
    }

    /// Checks `body` (the raw bytes received) against `headers`; the error names the check
    /// that failed (missing header, timestamp outside the window, no matching signature, …).
    pub fn verify(&self, headers: &HeaderMap, body: Bytes) -> Result<Webhook, VerifyError> {
        let (id, timestamp) = match &*self.0 {
            Keys::Standard(verifier) => {
                let found = WebhookHeaders {
                    id: required(headers, header::ID)?.to_owned(),
                    timestamp: required(headers, header::TIMESTAMP)?.to_owned(),
                    signature: required(headers, header::SIGNATURE)?.to_owned(),
                };
                verifier.verify_headers(&body, &found)?;
                let timestamp = clock::parse_timestamp(&found.timestamp)?;
                (Some(found.id), Some(timestamp))
            }
            Keys::Stripe(secrets, window) => {
                let value = required(headers, stripe::HEADER)?;
                any_secret(secrets, |s| stripe::verify(s, value, &body, window))?;
                let timestamp = stripe::StripeHeader::parse(value)?.timestamp;
                (stripe_event_id(&body), Some(timestamp))
            }
            Keys::GitHub(secrets) => {
                let value = required(headers, github::HEADER)?;
                any_secret(secrets, |s| github::verify(s, value, &body))?;
                let id = optional(headers, GITHUB_DELIVERY).map(str::to_owned);
                (id, None)
            }
        };
        Ok(Webhook {
            scheme: self.scheme(),
            id,
            timestamp,
            headers: headers.clone(),
            body,
        })
    }
}

/// Ok if any secret verifies; otherwise the first secret's error (the header and time checks
/// fail the same way for every secret, so it names the real problem).
fn any_secret(
    secrets: &[String],
    check: impl Fn(&str) -> Result<(), VerifyError>,
) -> Result<(), VerifyError> {
    let mut first_error = VerifyError::NoMatchingSignature;
    for (i, secret) in secrets.iter().enumerate() {
        match check(secret) {
            Ok(()) => return Ok(()),
            Err(error) if i == 0 => first_error = error,
            Err(_) => {}
        }
    }
    Err(first_error)
}

fn optional<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn required<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, VerifyError> {
    let value = headers.get(name).ok_or(VerifyError::MissingHeader(name))?;
    value.to_str().map_err(|_| VerifyError::MalformedHeader {
        header: name,
        reason: "not visible ASCII",
    })
}

/// A Stripe event's `id`, read only after its signature has been checked.
fn stripe_event_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Event {
        id: String,
    }
    serde_json::from_slice::<Event>(body).ok().map(|e| e.id)
}
