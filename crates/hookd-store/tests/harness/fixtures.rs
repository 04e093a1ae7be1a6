//! Records for the behavioural suites: applications, endpoints and messages at fixed times.

use std::collections::BTreeMap;

use hookd_core::model::{Application, Endpoint, Message, SealedKeys};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};
use hookd_store::PageRequest;

pub const T0: i64 = 1_700_000_000_000;

pub fn at(offset_ms: i64) -> Timestamp {
    Timestamp::from_millis(T0 + offset_ms)
}

pub fn app(uid: Option<&str>, created: i64) -> Application {
    Application {
        id: AppId::new(at(created)),
        uid: uid.map(str::to_owned),
        name: format!("app {created}"),
        metadata: BTreeMap::from([("tier".to_owned(), "gold".to_owned())]),
        throttle_rate: None,
        envelope: false,
        created_at: at(created),
        updated_at: at(created),
    }
}

pub fn endpoint(
    app: &Application,
    uid: Option<&str>,
    event_types: Option<&[&str]>,
    channels: Option<&[&str]>,
) -> Endpoint {
    let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
    Endpoint {
        id: EndpointId::new(at(1)),
        app_id: app.id.clone(),
        uid: uid.map(str::to_owned),
        url: "https://example.com/hook".into(),
        description: "orders".into(),
        event_types: event_types.map(list),
        channels: channels.map(list),
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: Some(10),
        timeout_secs: Some(5),
        max_concurrency: Some(8),
        ordering: Default::default(),
        metadata: BTreeMap::new(),
        headers: BTreeMap::from([("x-tenant".to_owned(), "42".to_owned())]),
        keys: SealedKeys::from_stored("hk1:test:sealed".into()),
        created_at: at(1),
        updated_at: at(1),
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
    }
}

pub fn message(
    app: &Application,
    event_type: &str,
    event_id: Option<&str>,
    channels: Option<&[&str]>,
    created: i64,
) -> Message {
    Message {
        id: MessageId::new(at(created)),
        app_id: app.id.clone(),
        event_type: event_type.into(),
        event_id: event_id.map(str::to_owned),
        channels: channels.map(|c| c.iter().map(|s| s.to_string()).collect()),
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(format!(r#"{{"n": {created}, "text": "héllo"}}"#).into_bytes()),
        created_at: at(created),
    }
}

pub fn first_page(limit: usize) -> PageRequest {
    PageRequest {
        limit,
        cursor: None,
    }
}
