//! Shopify: `X-Shopify-Hmac-Sha256` (base64) over the body. Nothing signed carries a time, so
//! a replay is caught only by the event id's deduplication.

use webhook_signature::shopify;

use crate::{Accepted, InboundRequest, Rejection};

/// The event's id, shared by every delivery of the event (Shopify's key for duplicates).
const EVENT_ID: &str = "x-shopify-event-id";
/// The webhook delivery's id, for senders that leave out the event id.
const WEBHOOK_ID: &str = "x-shopify-webhook-id";
/// The topic, e.g. `orders/create`.
const TOPIC: &str = "x-shopify-topic";

pub(super) fn verify(
    secret: &str,
    req: &InboundRequest<'_>,
    kind: &str,
) -> Result<Accepted, Rejection> {
    shopify::verify(secret, req.required(shopify::HEADER)?, req.body)?;
    let event_id = match req.header(EVENT_ID)? {
        Some(id) => Some(id),
        None => req.header(WEBHOOK_ID)?,
    };
    Ok(Accepted::event(event_id, req.header(TOPIC)?, kind))
}
