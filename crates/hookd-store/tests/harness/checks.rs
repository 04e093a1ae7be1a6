//! Checks several behaviour suites share: what a message's stored form and routes are, and an
//! attempt recorded by hand.

use hookd_core::AttemptId;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, Message, TriggerType};
use hookd_store::Store;

use super::fixtures::at;

/// Asserts that the store holds `msg` as it was published.
pub async fn assert_stored(store: &dyn Store, msg: &Message) {
    let stored = store
        .get_message(&msg.app_id, msg.id.as_str())
        .await
        .unwrap();
    assert_eq!(stored.as_ref(), Some(msg), "{msg:?}");
}

/// The uids of the endpoints `msg` was routed to, in the order the store lists them; each
/// delivery must be pending and due when the message was created.
pub async fn pending_routes(store: &dyn Store, msg: &Message) -> Vec<String> {
    store
        .list_message_deliveries(&msg.app_id, msg)
        .await
        .unwrap()
        .into_iter()
        .map(|(ep, delivery)| {
            assert_eq!(delivery.status, DeliveryStatus::Pending);
            assert_eq!(delivery.next_attempt_at, Some(msg.created_at));
            ep.uid.unwrap()
        })
        .collect()
}

/// An attempt on `msg` to `ep` at `offset` that leaves its delivery in `status`.
pub async fn finish(
    store: &dyn Store,
    msg: &Message,
    ep: &Endpoint,
    offset: i64,
    status: DeliveryStatus,
) {
    let succeeded = status == DeliveryStatus::Success;
    let attempt = Attempt {
        id: AttemptId::new(at(offset)),
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        url: ep.url.clone(),
        response_status_code: if succeeded { 200 } else { 500 },
        response: String::new(),
        response_head: String::new(),
        response_duration_ms: 3,
        status: if succeeded {
            status
        } else {
            DeliveryStatus::Fail
        },
        trigger_type: TriggerType::Scheduled,
        created_at: at(offset),
    };
    let delivery = Delivery {
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        status,
        attempt_count: 1,
        next_attempt_at: (status == DeliveryStatus::Pending).then(|| at(offset + 5_000)),
        updated_at: at(offset),
        ordering_key: None,
    };
    store.record_attempt(&attempt, &delivery).await.unwrap();
}
