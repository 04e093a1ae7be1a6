//! The ingest source's request and response bodies (Svix's `IngestSourceIn` and
//! `IngestSourceOut`), and how a body becomes a stored source: the provider configuration,
//! parsed by its type's scheme, is sealed with the source's token under the keyring, so
//! neither is stored in the clear.

use hookd_core::model::{Application, Metadata};
use hookd_core::{AppId, SourceId, Timestamp};
use hookd_store::IngestSource;
use hookd_store::store::ingest::internal_app_uid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::extract::metadata;
use crate::{ApiError, ApiState, token_hash, validate};
use hookd_ingest::SourceConfig;

/// Where a source's token is received, under `--public-url`.
pub const RECEIVE_PREFIX: &str = "/ingest/in/";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SourceIn {
    name: String,
    uid: Option<String>,
    #[serde(default, deserialize_with = "metadata")]
    metadata: Metadata,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    config: Value,
    /// hookd addition: the largest body accepted, up to `--max-payload-bytes` (its default).
    max_body_bytes: Option<u64>,
    /// hookd addition: requests per second accepted (none when not set).
    rate_limit: Option<u32>,
    /// hookd addition: a JSON pointer into the body whose value is the ordering key.
    #[serde(rename = "orderingKeyPointer")]
    ordering_pointer: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceOut {
    id: String,
    uid: Option<String>,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    config: Value,
    ingest_url: String,
    metadata: Metadata,
    max_body_bytes: Option<u64>,
    rate_limit: Option<u32>,
    #[serde(rename = "orderingKeyPointer")]
    ordering_pointer: Option<String>,
    created_at: String,
    updated_at: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RotateTokenOut {
    pub ingest_url: String,
}

/// What is sealed in [`IngestSource::sealed`]: the configuration with its secrets, and the
/// current token (the URL is answered on every read; only its hash is searchable).
#[derive(Serialize, Deserialize)]
pub(super) struct Sealed {
    pub config: Value,
    pub token: String,
}

impl Sealed {
    pub fn seal(&self, state: &ApiState, source: &SourceId) -> String {
        let text = serde_json::to_vec(self).expect("JSON values serialize");
        state.keyring().seal(source.as_str(), &text)
    }

    pub fn open(state: &ApiState, source: &IngestSource) -> Result<Self, ApiError> {
        let text = state
            .keyring()
            .unseal(source.id.as_str(), &source.sealed)
            .map_err(|e| ApiError::Internal(format!("source {}: {e}", source.id)))?;
        serde_json::from_slice(&text)
            .map_err(|e| ApiError::Internal(format!("source {}: {e}", source.id)))
    }

    /// The configuration, parsed again by its scheme.
    pub fn scheme(&self, kind: &str) -> Result<SourceConfig, ApiError> {
        SourceConfig::parse(kind, &self.config)
            .map_err(|e| ApiError::Internal(format!("a stored {kind} source: {}", e.message)))
    }
}

/// A new unguessable token: 24 random bytes, hex.
pub(super) fn new_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the system's random source works");
    hex::encode(bytes)
}

/// The URL that receives a source's requests.
pub(super) fn ingest_url(state: &ApiState, token: &str) -> String {
    let base = state.config().public_url.trim_end_matches('/');
    format!("{base}{RECEIVE_PREFIX}{token}")
}

impl SourceIn {
    /// Checks the fields; the configuration as its type's scheme parses it.
    pub(super) fn validate(&self, state: &ApiState) -> Result<SourceConfig, ApiError> {
        validate::text("name", &self.name, 256)?;
        validate::uid("uid", self.uid.as_deref())?;
        let max = state.config().max_payload_bytes as u64;
        if let Some(bytes) = self.max_body_bytes
            && !(1..=max).contains(&bytes)
        {
            return Err(ApiError::body_field(
                "maxBodyBytes",
                format!("must be between 1 and {max} (--max-payload-bytes)"),
            ));
        }
        if self.rate_limit == Some(0) {
            return Err(ApiError::body_field("rateLimit", "must be at least 1"));
        }
        if let Some(pointer) = &self.ordering_pointer
            && (!pointer.starts_with('/') || pointer.len() > 256)
        {
            return Err(ApiError::body_field(
                "orderingKeyPointer",
                "a JSON pointer into the body (RFC 6901), such as /data/object/customer",
            ));
        }
        SourceConfig::parse(&self.kind, &self.config)
            .map_err(|e| ApiError::body_field(&e.field, e.message))
    }

    /// A new source with a new token, and the application it owns.
    pub(super) fn into_new(
        self,
        state: &ApiState,
        scheme: &SourceConfig,
    ) -> (IngestSource, Application) {
        let now = state.clock().now();
        let id = SourceId::new(now);
        let app = Application {
            id: AppId::new(now),
            uid: Some(internal_app_uid(&id)),
            name: self.name.clone(),
            metadata: Metadata::new(),
            throttle_rate: None,
            // Forwarded as the provider sent it: never wrapped in an envelope.
            envelope: false,
            created_at: now,
            updated_at: now,
        };
        let token = new_token();
        let sealed = Sealed {
            config: scheme.to_stored(),
            token: token.clone(),
        };
        let source = IngestSource {
            sealed: sealed.seal(state, &id),
            id,
            uid: self.uid,
            name: self.name,
            kind: scheme.kind().to_owned(),
            metadata: self.metadata,
            app_id: app.id.clone(),
            token_hash: token_hash(&token),
            previous_token_hash: None,
            previous_until: None,
            max_body_bytes: self.max_body_bytes,
            rate_limit: self.rate_limit,
            ordering_pointer: self.ordering_pointer,
            created_at: now,
            updated_at: now,
        };
        (source, app)
    }

    /// `source` changed to this body: its token stays.
    pub(super) fn apply_to(
        self,
        state: &ApiState,
        source: &mut IngestSource,
        scheme: &SourceConfig,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let token = Sealed::open(state, source)?.token;
        let sealed = Sealed {
            config: scheme.to_stored(),
            token,
        };
        source.sealed = sealed.seal(state, &source.id);
        source.uid = self.uid;
        source.name = self.name;
        source.kind = scheme.kind().to_owned();
        source.metadata = self.metadata;
        source.max_body_bytes = self.max_body_bytes;
        source.rate_limit = self.rate_limit;
        source.ordering_pointer = self.ordering_pointer;
        source.updated_at = now;
        Ok(())
    }
}

impl SourceOut {
    /// `source` as the API shows it: its configuration without secrets, its URL.
    pub fn of(state: &ApiState, source: IngestSource) -> Result<Self, ApiError> {
        let sealed = Sealed::open(state, &source)?;
        let config = sealed.scheme(&source.kind)?.to_out();
        Ok(Self {
            id: source.id.to_string(),
            uid: source.uid,
            name: source.name,
            kind: source.kind,
            config,
            ingest_url: ingest_url(state, &sealed.token),
            metadata: source.metadata,
            max_body_bytes: source.max_body_bytes,
            rate_limit: source.rate_limit,
            ordering_pointer: source.ordering_pointer,
            created_at: source.created_at.to_rfc3339(),
            updated_at: source.updated_at.to_rfc3339(),
        })
    }
}
