//! Stripe: `Stripe-Signature: t=…,v1=…` over `{t}.{body}`, ±300 s; the event's id and type are
//! in the (verified) body.

use webhook_signature::stripe;

use crate::body::Envelope;
use crate::{Accepted, InboundRequest, Rejection};

pub(super) fn verify(
    secret: &str,
    req: &InboundRequest<'_>,
    kind: &str,
) -> Result<Accepted, Rejection> {
    stripe::verify(
        secret,
        req.required(stripe::HEADER)?,
        req.body,
        &req.window(),
    )?;
    let envelope = Envelope::read(req.body);
    Ok(Accepted::event(envelope.id(), envelope.kind(), kind))
}
