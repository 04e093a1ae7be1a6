//! GitHub: `X-Hub-Signature-256: sha256=…` over the body. A webhook set up in GitHub without a
//! secret is sent unsigned, so a source without one checks nothing (the docs say so).

use webhook_signature::github;

use crate::{Accepted, InboundRequest, Rejection};

/// The delivery's id, the same when GitHub redelivers it.
const DELIVERY: &str = "x-github-delivery";
/// The event's name, e.g. `push`.
const EVENT: &str = "x-github-event";

pub(super) fn verify(
    secret: Option<&str>,
    req: &InboundRequest<'_>,
    kind: &str,
) -> Result<Accepted, Rejection> {
    if let Some(secret) = secret {
        github::verify(secret, req.required(github::HEADER)?, req.body)?;
    }
    Ok(Accepted::event(
        req.header(DELIVERY)?,
        req.header(EVENT)?,
        kind,
    ))
}
