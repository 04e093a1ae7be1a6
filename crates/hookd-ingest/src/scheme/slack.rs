//! Slack: `X-Slack-Signature: v0=…` over `v0:{X-Slack-Request-Timestamp}:{body}`, ±300 s. The
//! Events API's `url_verification` handshake (signed like any request) is answered with its
//! `challenge`; an `event_callback`'s type is its inner event's.

use webhook_signature::slack;

use crate::body::Envelope;
use crate::request::RejectReason;
use crate::{Accepted, InboundRequest, Rejection};

pub(super) fn verify(
    secret: &str,
    req: &InboundRequest<'_>,
    kind: &str,
) -> Result<Accepted, Rejection> {
    slack::verify(
        secret,
        req.required(slack::SIGNATURE)?,
        req.required(slack::TIMESTAMP)?,
        req.body,
        &req.window(),
    )?;
    let envelope = Envelope::read(req.body);
    match envelope.kind() {
        Some("url_verification") => challenge(&envelope),
        Some("event_callback") => Ok(Accepted::event(
            envelope.event_id(),
            envelope.inner_kind(),
            kind,
        )),
        other => Ok(Accepted::event(envelope.event_id(), other, kind)),
    }
}

/// The answer to `url_verification`: its `challenge`, as plain text.
fn challenge(envelope: &Envelope) -> Result<Accepted, Rejection> {
    let challenge = envelope.challenge().ok_or_else(|| {
        Rejection::new(
            RejectReason::Malformed,
            "url_verification without a string challenge",
        )
    })?;
    Ok(Accepted::Challenge {
        content_type: "text/plain",
        body: challenge.as_bytes().to_vec(),
    })
}
