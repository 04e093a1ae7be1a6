//! Helpers for the queue suite: claiming with a fixed lease, publishing, reading a delivery
//! back, and recording attempts and reading them back.

use std::collections::BTreeSet;

use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, TriggerType,
};
use hookd_core::{AttemptId, EndpointId, MessageId, Timestamp};
use hookd_store::{ClaimRequest, ClaimedDelivery, NewMessage, Store, StoreError};

use super::fixtures::{app, at, endpoint, message};

/// How long the claims of the queue suite lease their deliveries.
pub const LEASE_MS: i64 = 30_000;

pub fn request(now: i64, limit: usize, per_endpoint: usize, skip: &[&Endpoint]) -> ClaimRequest {
    ClaimRequest {
        now: at(now),
        lease_until: at(now + LEASE_MS),
        limit,
        per_endpoint,
        rooms: skip.iter().map(|e| (e.id.clone(), 0)).collect(),
        ceiling: per_endpoint,
    }
}

pub async fn claim(
    store: &dyn Store,
    now: i64,
    limit: usize,
    per_endpoint: usize,
) -> Vec<ClaimedDelivery> {
    store
        .claim_due(&request(now, limit, per_endpoint, &[]))
        .await
        .unwrap()
}

/// The (message, endpoint) pairs of a claim.
pub fn pairs(claimed: &[ClaimedDelivery]) -> BTreeSet<(MessageId, EndpointId)> {
    claimed
        .iter()
        .map(|c| {
            (
                c.delivery.message_id.clone(),
                c.delivery.endpoint_id.clone(),
            )
        })
        .collect()
}

pub fn pair(m: &Message, e: &Endpoint) -> (MessageId, EndpointId) {
    (m.id.clone(), e.id.clone())
}

/// An application with `count` endpoints that take every message.
pub async fn app_with_endpoints(store: &dyn Store, count: usize) -> (Application, Vec<Endpoint>) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let mut endpoints = Vec::new();
    for i in 0..count {
        let ep = endpoint(&a, Some(&format!("ep-{i}")), None, None);
        store.create_endpoint(&ep).await.unwrap();
        endpoints.push(ep);
    }
    (a, endpoints)
}

/// Publishes a message created (and so due) at `created`.
pub async fn publish(store: &dyn Store, a: &Application, created: i64) -> Message {
    let msg = message(a, "order.shipped", None, None, created);
    store.publish(NewMessage::new(msg.clone())).await.unwrap();
    msg
}

/// The stored delivery of `msg` to `ep`.
pub async fn delivery(store: &dyn Store, msg: &Message, ep: &Endpoint) -> Option<Delivery> {
    store
        .list_message_deliveries(&msg.app_id, msg)
        .await
        .unwrap()
        .into_iter()
        .find(|(e, _)| e.id == ep.id)
        .map(|(_, d)| d)
}

pub fn attempt(msg: &Message, ep: &Endpoint, at_ms: i64, status: DeliveryStatus) -> Attempt {
    let code = if status == DeliveryStatus::Success {
        200
    } else {
        500
    };
    Attempt {
        id: AttemptId::new(at(at_ms)),
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        url: ep.url.clone(),
        response_status_code: code,
        response: "body".into(),
        response_head: format!("HTTP/1.1 {code}\r\nretry-after: 5\r\n"),
        response_duration_ms: 7,
        status,
        trigger_type: TriggerType::Scheduled,
        created_at: at(at_ms),
    }
}

/// Records an attempt at `at_ms` moving the delivery to `status` with `count` attempts, due
/// again at `next` (if pending); returns the endpoint's failure-streak start.
pub async fn record(
    store: &dyn Store,
    msg: &Message,
    ep: &Endpoint,
    at_ms: i64,
    outcome: DeliveryStatus,
    count: u32,
    next: Option<i64>,
) -> Result<Option<Timestamp>, StoreError> {
    let attempt_status = match outcome {
        DeliveryStatus::Success => DeliveryStatus::Success,
        _ => DeliveryStatus::Fail,
    };
    let next = Delivery {
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        status: outcome,
        attempt_count: count,
        next_attempt_at: next.map(at),
        updated_at: at(at_ms),
        ordering_key: None,
    };
    store
        .record_attempt(&attempt(msg, ep, at_ms, attempt_status), &next)
        .await
}

/// The endpoint's attempts, newest first (the first ten).
pub async fn endpoint_attempts(store: &dyn Store, ep: &Endpoint) -> Vec<Attempt> {
    let page = hookd_store::PageRequest {
        limit: 10,
        cursor: None,
    };
    store
        .list_attempts_by_endpoint(ep, &Default::default(), &page)
        .await
        .unwrap()
        .items
}
