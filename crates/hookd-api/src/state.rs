//! What every handler shares: the store, the clock, the configuration, and the handle that
//! wakes the delivery engine when new work is written.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::model::{Application, EventType};
use hookd_core::{Clock, Concurrency, EndpointId, EndpointLoad, SourceId};
use hookd_ingest::SourceConfig;
use hookd_store::Store;
use hookd_vault::{CredentialHeaders, KeptOpen, Keyring};
use tokio::sync::Notify;

use crate::ApiError;
use crate::auth::{Principal, TokenCache};
use crate::cache::TtlCache;
use crate::rate_limit::RateLimiter;

/// How long a looked-up application is used without asking the database again; another
/// process's change to an application is seen within this time.
pub const APP_CACHE_TTL: Duration = Duration::from_secs(5);

/// Options of the API that an operator sets.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Largest accepted message payload, in bytes (413 above it).
    pub max_payload_bytes: usize,
    /// A published payload larger than this is counted and logged as a warning (producers
    /// should stay small); 0 for never.
    pub large_payload_bytes: usize,
    /// Refuse messages whose event type is not in the catalog or is archived.
    pub strict_event_types: bool,
    /// Accept `http://` endpoint URLs (otherwise only `https://`).
    pub allow_http_endpoints: bool,
    /// SHA-256 hex digests of admin tokens given in configuration (not stored).
    pub configured_admin_token_hashes: Vec<String>,
    /// Requests worked on at once; more are answered 503 at once.
    pub max_in_flight: usize,
    /// The master keys endpoint signing keys are sealed under. The default is a new in-memory
    /// key (for tests); `hookd serve` gives the configured one.
    pub keyring: Arc<Keyring>,
    /// How long a rotated-out endpoint key keeps signing beside the new one, unless the
    /// rotation asks otherwise.
    pub rotation_overlap: Duration,
    /// Where hookd is reached from outside (`https://hooks.example.com`): the base of portal
    /// links.
    pub public_url: String,
    /// Requests per second an app-scoped token may make unless it has its own limit (admin
    /// tokens are unlimited unless they have one); 0 for no default limit.
    pub app_token_rate_limit: u32,
    /// An audit line for every request, reads and publishes too (otherwise only for requests
    /// that change something or are refused).
    pub access_log: bool,
    /// Which endpoint header names carry credentials: sealed with the endpoint's keys and
    /// shown to customers' tokens by name only.
    pub credential_headers: CredentialHeaders,
    /// Endpoints an application may have; creating one more answers 422. A message goes to
    /// every endpoint that takes it, so this bounds one publish's fan-out.
    pub max_endpoints_per_app: u64,
    /// An endpoint's secret is answered by `GET …/secret` once after it is made (created or
    /// rotated); later reads are refused, and rotation is the remedy for a lost one. Off by
    /// default, as in Svix, where the secret can be read at any time.
    pub secrets_shown_once: bool,
}

/// [`ApiConfig::max_endpoints_per_app`] unless configured.
pub const DEFAULT_MAX_ENDPOINTS_PER_APP: u64 = 50;

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            large_payload_bytes: 0,
            strict_event_types: false,
            allow_http_endpoints: false,
            configured_admin_token_hashes: Vec::new(),
            max_in_flight: 1024,
            keyring: Arc::new(Keyring::ephemeral()),
            rotation_overlap: Duration::from_secs(24 * 3600),
            public_url: "http://127.0.0.1:8071".into(),
            app_token_rate_limit: 100,
            access_log: false,
            credential_headers: CredentialHeaders::default(),
            max_endpoints_per_app: DEFAULT_MAX_ENDPOINTS_PER_APP,
            secrets_shown_once: false,
        }
    }
}

/// Shared state of the API, cheap to clone.
#[derive(Clone)]
pub struct ApiState(Arc<Inner>);

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: ApiConfig,
    new_work: Arc<Notify>,
    tokens: TokenCache,
    apps: TtlCache<Application>,
    /// Event types by name, and names the catalog lacks (`None`), as [`Self::event_type`]
    /// found them.
    event_types: TtlCache<Option<EventType>>,
    limiter: RateLimiter,
    /// Ingest sources' schemes, opened from their sealed rows once, not for every request.
    source_schemes: KeptOpen<SourceId, SourceConfig>,
    /// This process's engine, when it runs one: endpoints' current concurrency.
    load: Option<Arc<dyn EndpointLoad>>,
    /// Wakes this process's background-task runner, when it runs one.
    tasks: Option<Arc<Notify>>,
}

impl ApiState {
    /// State over `store`; `new_work` is notified whenever deliveries become due.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: ApiConfig,
        new_work: Arc<Notify>,
    ) -> Self {
        Self(Arc::new(Inner {
            store,
            clock,
            config,
            new_work,
            tokens: TokenCache::new(),
            apps: TtlCache::new(APP_CACHE_TTL),
            event_types: TtlCache::new(APP_CACHE_TTL),
            limiter: RateLimiter::default(),
            source_schemes: KeptOpen::default(),
            load: None,
            tasks: None,
        }))
    }

    /// The same state, showing `load` (this process's engine) in endpoint views.
    ///
    /// # Panics
    /// If the state was cloned already: set it before serving.
    #[must_use]
    pub fn with_endpoint_load(mut self, load: Arc<dyn EndpointLoad>) -> Self {
        Arc::get_mut(&mut self.0)
            .expect("the endpoint load is set before the state is shared")
            .load = Some(load);
        self
    }

    /// Wakes `tasks` (this process's background-task runner) whenever a task is created;
    /// without it, runners find new tasks at their next look.
    ///
    /// # Panics
    /// If the state was cloned already: set it before serving.
    #[must_use]
    pub fn with_task_runner(mut self, tasks: Arc<Notify>) -> Self {
        Arc::get_mut(&mut self.0)
            .expect("the task runner is set before the state is shared")
            .tasks = Some(tasks);
        self
    }

    /// Tells this process's background-task runner, if any, that a task was created.
    pub fn wake_tasks(&self) {
        if let Some(tasks) = &self.0.tasks {
            tasks.notify_one();
        }
    }

    /// This process's engine's current concurrency for `endpoint`, if it has work for it.
    pub fn endpoint_concurrency(&self, endpoint: &EndpointId) -> Option<Concurrency> {
        self.0.load.as_ref()?.concurrency(endpoint)
    }

    pub fn store(&self) -> &dyn Store {
        self.0.store.as_ref()
    }

    pub fn clock(&self) -> &dyn Clock {
        self.0.clock.as_ref()
    }

    pub fn config(&self) -> &ApiConfig {
        &self.0.config
    }

    pub(crate) fn tokens(&self) -> &TokenCache {
        &self.0.tokens
    }

    pub(crate) fn limiter(&self) -> &RateLimiter {
        &self.0.limiter
    }

    pub(crate) fn source_schemes(&self) -> &KeptOpen<SourceId, SourceConfig> {
        &self.0.source_schemes
    }

    pub fn keyring(&self) -> &Keyring {
        &self.0.config.keyring
    }

    /// Tells the delivery engine that deliveries were written.
    pub fn wake_engine(&self) {
        self.0.new_work.notify_one();
    }

    /// The application `id_or_uid` names, if `principal` may see it. Looked up at most once
    /// per [`APP_CACHE_TTL`]: publishing names its application on every request.
    pub async fn app(
        &self,
        principal: &Principal,
        id_or_uid: &str,
    ) -> Result<Application, ApiError> {
        let app = match self.0.apps.get(id_or_uid) {
            Some(app) => app,
            None => {
                let app = self
                    .store()
                    .get_app(id_or_uid)
                    .await?
                    .ok_or(ApiError::NotFound("application"))?;
                self.0.apps.put(id_or_uid.to_owned(), app.clone());
                app
            }
        };
        principal.require_app(&app.id)?;
        Ok(app)
    }

    /// Forgets cached applications, after one was changed or deleted.
    pub(crate) fn forget_apps(&self) {
        self.0.apps.clear();
    }

    /// The catalog's event type `name`, if it has one. Looked up at most once per
    /// [`APP_CACHE_TTL`], as applications are: every publish asks whether its event type
    /// wants the envelope (and, in strict mode, for its schema).
    pub async fn event_type(&self, name: &str) -> Result<Option<EventType>, ApiError> {
        if let Some(found) = self.0.event_types.get(name) {
            return Ok(found);
        }
        let found = self.store().get_event_type(name).await?;
        self.0.event_types.put(name.to_owned(), found.clone());
        Ok(found)
    }

    /// Forgets cached event types, after the catalog changed.
    pub(crate) fn forget_event_types(&self) {
        self.0.event_types.clear();
    }
}
