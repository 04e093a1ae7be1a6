//! hookd's side of the relay tests: an SQLite store with one application, relays into it,
//! and what it published. Producers are `hookd_sources::testing`'s.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookd_core::model::Application;
use hookd_core::{AppId, Clock, SystemClock};
use hookd_outbox::Event;
pub use hookd_sources::testing::Producer;
use hookd_sources::{SourceRelay, SourceRelayConfig, SourceSpec};
use hookd_store::prelude::*;
use hookd_store::sqlite::SqliteStore;
use hookd_store::{MessageFilter, PageRequest, RelayRules};
use tokio::sync::Notify;

pub const RULES: RelayRules = RelayRules {
    strict_event_types: false,
    max_payload_bytes: 1024,
};

/// hookd's side: an SQLite store with the application `acme`.
pub struct Hookd {
    pub store: Arc<SqliteStore>,
    pub app: AppId,
    _dir: tempfile::TempDir,
}

impl Hookd {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("hookd.db"))
            .await
            .unwrap();
        let now = SystemClock.now();
        let app = Application {
            id: AppId::new(now),
            uid: Some("acme".into()),
            name: "Acme".into(),
            metadata: BTreeMap::new(),
            throttle_rate: None,
            envelope: false,
            created_at: now,
            updated_at: now,
        };
        store.create_app(&app).await.unwrap();
        Self {
            store: Arc::new(store),
            app: app.id,
            _dir: dir,
        }
    }

    /// A relay of `producer`, bound to `app` if given.
    pub fn relay(&self, producer: &Producer, app: Option<&str>) -> SourceRelay {
        relay_into(self.store.clone(), &producer.url, app)
    }

    /// The payloads of acme's messages, oldest first.
    pub async fn payloads(&self) -> Vec<String> {
        payloads(self.store.as_ref(), &self.app).await
    }
}

/// A relay of the source at `url` into `store`, bound to `app` if given.
pub fn relay_into(store: Arc<dyn Store>, url: &str, app: Option<&str>) -> SourceRelay {
    let mut spec: SourceSpec = format!("orders={url}").parse().unwrap();
    spec.app = app.map(str::to_owned);
    let config = SourceRelayConfig {
        rules: RULES,
        batch: 100,
        poll_interval: Duration::from_millis(50),
        poll_interval_unsignalled: Duration::from_millis(50),
    };
    SourceRelay::new(
        spec,
        store,
        Arc::new(SystemClock),
        config,
        Arc::new(Notify::new()),
    )
    .unwrap()
}

/// The payloads of `app`'s messages, oldest first.
pub async fn payloads(store: &dyn Store, app: &AppId) -> Vec<String> {
    let page = PageRequest {
        limit: 10_000,
        cursor: None,
    };
    let messages = store
        .list_messages(app, &MessageFilter::default(), &page)
        .await
        .unwrap();
    let mut out: Vec<(String, String)> = messages
        .items
        .into_iter()
        .map(|m| {
            let payload = String::from_utf8(m.payload.unwrap_or_default()).unwrap();
            (m.id.to_string(), payload)
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, payload)| payload).collect()
}

/// An event for acme with payload `{"n": n}`.
pub fn event(n: usize) -> Event {
    Event::from_json_text("acme", "order.shipped", format!(r#"{{"n": {n}}}"#))
}
