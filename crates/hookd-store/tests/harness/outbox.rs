//! What the outbox tests share: the application `acme` they relay into, one relay pass, and
//! the messages a pass published.

use hookd_core::{Clock, SystemClock};
use hookd_outbox::Event;
use hookd_store::{MessageFilter, RelayRules, Relayed, Store};

use super::fixtures::{app, endpoint, first_page};

pub const RULES: RelayRules = RelayRules {
    strict_event_types: false,
    max_payload_bytes: 1024,
};

/// An application (uid `acme`) with one endpoint taking everything; returns its id.
pub async fn acme(store: &dyn Store) -> String {
    let app = app(Some("acme"), 0);
    store.create_app(&app).await.unwrap();
    store
        .create_endpoint(&endpoint(&app, None, None, None))
        .await
        .unwrap();
    app.id.to_string()
}

pub async fn relay(store: &dyn Store, rules: &RelayRules) -> Relayed {
    store
        .relay_outbox(100, rules, SystemClock.now())
        .await
        .unwrap()
}

/// The event ids of the application's messages, with their delivery counts.
pub async fn published(store: &dyn Store, app: &str) -> Vec<(String, usize)> {
    let app = store.get_app(app).await.unwrap().unwrap();
    let page = store
        .list_messages(&app.id, &MessageFilter::default(), &first_page(1000))
        .await
        .unwrap();
    let mut out = Vec::new();
    for message in page.items {
        let deliveries = store
            .list_message_deliveries(&app.id, &message)
            .await
            .unwrap();
        out.push((
            message.event_id.clone().unwrap_or_default(),
            deliveries.len(),
        ));
    }
    out.sort();
    out
}

pub fn event(event_id: &str) -> Event {
    Event::from_json_text("acme", "order.shipped", r#"{"order": 1}"#).event_id(event_id)
}

/// The messages of `acme`, oldest first: (eventId, ordering key, whether its one delivery
/// waits behind another).
pub async fn keyed(store: &dyn Store) -> Vec<(String, Option<String>, bool)> {
    let app = store.get_app("acme").await.unwrap().unwrap();
    let page = store
        .list_messages(&app.id, &MessageFilter::default(), &first_page(1000))
        .await
        .unwrap();
    let mut out = Vec::new();
    for message in page.items.into_iter().rev() {
        let deliveries = store
            .list_message_deliveries(&app.id, &message)
            .await
            .unwrap();
        let waiting = deliveries.iter().all(|(_, d)| d.is_waiting());
        out.push((message.event_id.unwrap(), message.ordering_key, waiting));
    }
    out
}

pub fn keyed_event(event_id: &str, key: &str) -> Event {
    event(event_id).ordering_key(key)
}
