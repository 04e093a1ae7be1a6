//! A real engine over a real SQLite file (or a PostgreSQL database, for what only a shared
//! queue shows), delivering to real receivers on loopback, with a clock the test moves by hand.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookd_core::model::{Application, DeliveryStatus, Endpoint, Message};
use hookd_core::{AppId, Clock, EndpointId, ManualClock, MessageId, Timestamp};
use hookd_engine::http::ssrf::AddressPolicy;
use hookd_engine::http::{HttpConfig, WebhookSender};
use hookd_engine::{Engine, EngineConfig};
use hookd_store::{NewMessage, Store};
use hookd_vault::{EndpointKeys, Keyring, Scheme};
use tokio::sync::Notify;
use webhook_signature::Secret;

pub use hookd_engine::testing::Receiver;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const START: i64 = 1_700_000_000_000;

/// A store, an engine running on it with a manual clock, and helpers to set up work.
pub struct Harness {
    pub store: Arc<dyn Store>,
    pub clock: Arc<ManualClock>,
    pub wake: Arc<Notify>,
    pub app: Application,
    /// The master keys the engine opens endpoint keys with.
    pub keyring: Arc<Keyring>,
    /// The PostgreSQL database's URL, on PostgreSQL.
    pub postgres_url: Option<String>,
    /// The engine, to read what it learned.
    pub engine: Arc<Engine>,
    /// What keeps the database: its directory, or its PostgreSQL guard (dropped last).
    _database: Box<dyn std::any::Any + Send + Sync>,
}

impl Harness {
    /// Starts an engine with `config` (loopback allowed, fast polling unless set).
    pub async fn start(config: EngineConfig) -> Self {
        Self::start_with_policy(config, loopback()).await
    }

    pub async fn start_with_policy(config: EngineConfig, policy: AddressPolicy) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = hookd_store::sqlite::SqliteStore::open(dir.path().join("hookd.db"))
            .await
            .unwrap();
        Self::start_on(Arc::new(store), config, policy, Box::new(dir), None).await
    }

    /// Starts an engine with `config` on a new PostgreSQL database named after `test`; `None`
    /// when no PostgreSQL server is configured (the test is skipped, as it says).
    pub async fn start_on_postgres(test: &str, config: EngineConfig) -> Option<Self> {
        let (url, db) = hookd_store::testing::fresh_postgres(test).await?;
        let store = hookd_store::postgres::PgStore::connect(&url).await.unwrap();
        Some(Self::start_on(Arc::new(store), config, loopback(), Box::new(db), Some(url)).await)
    }

    /// Another process's engine on the same PostgreSQL database, with `config`, sharing this
    /// harness's clock and keys; returns its store.
    pub async fn another_process(&self, config: EngineConfig) -> Arc<dyn Store> {
        let url = self
            .postgres_url
            .as_deref()
            .expect("a harness on PostgreSQL");
        let store: Arc<dyn Store> =
            Arc::new(hookd_store::postgres::PgStore::connect(url).await.unwrap());
        let config = EngineConfig {
            keyring: self.keyring.clone(),
            ..config
        };
        spawn_engine(
            store.clone(),
            self.clock.clone(),
            config,
            loopback(),
            Arc::default(),
        );
        store
    }

    async fn start_on(
        store: Arc<dyn Store>,
        config: EngineConfig,
        policy: AddressPolicy,
        database: Box<dyn std::any::Any + Send + Sync>,
        postgres_url: Option<String>,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let wake = Arc::new(Notify::new());
        let keyring = config.keyring.clone();
        let engine = spawn_engine(store.clone(), clock.clone(), config, policy, wake.clone());
        let app = Application {
            id: AppId::new(Timestamp::from_millis(START)),
            uid: None,
            name: "Acme".into(),
            metadata: BTreeMap::new(),
            throttle_rate: None,
            envelope: false,
            created_at: Timestamp::from_millis(START),
            updated_at: Timestamp::from_millis(START),
        };
        store.create_app(&app).await.unwrap();
        Self {
            store,
            clock,
            wake,
            app,
            keyring,
            postgres_url,
            engine,
            _database: database,
        }
    }

    /// A config that polls often, so tests that move the clock do not wait a second.
    pub fn config() -> EngineConfig {
        EngineConfig {
            poll_interval: Duration::from_millis(20),
            ..EngineConfig::default()
        }
    }

    /// An endpoint at `url` signing `v1` with [`SECRET`].
    pub async fn endpoint(&self, url: &str) -> Endpoint {
        let keys = EndpointKeys::new(&[Scheme::V1], Some(Secret::parse(SECRET).unwrap())).unwrap();
        self.endpoint_with_keys(url, &keys).await
    }

    /// An endpoint at `url` that takes at most `max` attempts at once.
    pub async fn endpoint_at_most(&self, url: &str, max: u16) -> Endpoint {
        let mut endpoint = self.endpoint(url).await;
        endpoint.max_concurrency = Some(max);
        self.store.update_endpoint(&endpoint).await.unwrap();
        endpoint
    }

    /// The engine's current concurrency limit for `endpoint`, while it has a lane.
    pub fn limit_of(&self, endpoint: &Endpoint) -> Option<usize> {
        self.engine
            .endpoint_concurrency()
            .into_iter()
            .find(|(id, _, _)| *id == endpoint.id)
            .map(|(_, limit, _)| limit)
    }

    /// An endpoint at `url` signing with `keys`.
    pub async fn endpoint_with_keys(&self, url: &str, keys: &EndpointKeys) -> Endpoint {
        let now = self.clock.now();
        let id = EndpointId::new(now);
        let endpoint = Endpoint {
            keys: keys.seal(&self.keyring, &id),
            id,
            app_id: self.app.id.clone(),
            uid: None,
            url: url.into(),
            description: String::new(),
            event_types: None,
            channels: None,
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: None,
            timeout_secs: None,
            max_concurrency: None,
            ordering: Default::default(),
            metadata: BTreeMap::new(),
            headers: BTreeMap::new(),
            created_at: now,
            updated_at: now,
            destination: Default::default(),
            batch_size: 1,
            max_wait_secs: 0,
        };
        self.store.create_endpoint(&endpoint).await.unwrap();
        endpoint
    }

    /// Publishes a message with `payload` and wakes the engine, as the API does.
    pub async fn publish(&self, payload: &str) -> Message {
        self.publish_typed("order.shipped", payload).await
    }

    /// Publishes a message of `event_type`.
    pub async fn publish_typed(&self, event_type: &str, payload: &str) -> Message {
        let message = self.message(event_type, payload);
        self.store
            .publish(NewMessage::new(message.clone()))
            .await
            .unwrap();
        self.wake.notify_one();
        message
    }

    /// A message of `event_type` in the harness's application, created now (not stored).
    pub fn message(&self, event_type: &str, payload: &str) -> Message {
        let now = self.clock.now();
        Message {
            id: MessageId::new(now),
            app_id: self.app.id.clone(),
            event_type: event_type.into(),
            event_id: None,
            channels: None,
            ordering_key: None,
            tags: None,
            deliver_at: None,
            payload: Some(payload.as_bytes().to_vec()),
            created_at: now,
        }
    }

    /// Moves the clock and wakes the engine so due retries go out now.
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
        self.wake.notify_one();
    }

    /// Where the message stands with the endpoint.
    pub async fn status(&self, message: &Message, endpoint: &Endpoint) -> DeliveryStatus {
        let deliveries = self
            .store
            .list_message_deliveries(&self.app.id, message)
            .await
            .unwrap();
        deliveries
            .into_iter()
            .find(|(e, _)| e.id == endpoint.id)
            .map(|(_, d)| d.status)
            .unwrap()
    }

    /// Waits (bounded) until `n` attempts of the delivery are recorded and it is not in flight.
    pub async fn wait_for_attempts(
        &self,
        message: &Message,
        endpoint: &Endpoint,
        n: u32,
    ) -> DeliveryStatus {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let deliveries = self
                .store
                .list_message_deliveries(&self.app.id, message)
                .await
                .unwrap();
            let (_, delivery) = deliveries
                .into_iter()
                .find(|(e, _)| e.id == endpoint.id)
                .unwrap();
            if delivery.attempt_count >= n && delivery.status != DeliveryStatus::Sending {
                return delivery.status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} attempts were never recorded"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (bounded) until the delivery reaches `status`.
    pub async fn wait_for_status(
        &self,
        message: &Message,
        endpoint: &Endpoint,
        status: DeliveryStatus,
    ) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.status(message, endpoint).await != status {
            assert!(
                tokio::time::Instant::now() < deadline,
                "delivery never reached {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The SSRF guard's defaults, with loopback allowed for the tests' receivers.
fn loopback() -> AddressPolicy {
    AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap())
}

/// Runs an engine over `store` until the test ends, woken through `wake`.
fn spawn_engine(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    config: EngineConfig,
    policy: AddressPolicy,
    wake: Arc<Notify>,
) -> Arc<Engine> {
    let sender = WebhookSender::new(HttpConfig {
        policy,
        ..HttpConfig::default()
    })
    .unwrap();
    let engine = Engine::new(store, clock, sender, config, wake);
    tokio::spawn(engine.clone().run(std::future::pending()));
    engine
}

impl Harness {
    /// Waits (bounded) until hookd has disabled the endpoint, and returns it.
    pub async fn wait_until_disabled(&self, endpoint: &Endpoint) -> Endpoint {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let stored = self
                .store
                .get_endpoint(&self.app.id, endpoint.id.as_str())
                .await
                .unwrap()
                .unwrap();
            if stored.disabled {
                return stored;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the endpoint was never disabled"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
