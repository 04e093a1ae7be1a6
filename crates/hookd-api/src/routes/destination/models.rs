//! The destination routes' bodies in Svix's shape (`type` and `config` beside the common
//! fields), their checks, and how a body becomes a new [`Endpoint`] or changes one.

use std::collections::BTreeMap;

use hookd_core::destination::Destination;
use hookd_core::model::{Application, Endpoint, Metadata, Ordering};
use hookd_core::{EndpointId, MessageId, Timestamp};
use hookd_vault::{EndpointKeys, Scheme};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::config::{self, Parsed};
use crate::extract::{metadata, metadata_patch, patch_field};
use crate::routes::endpoint::{SealedChange, place, set_disabled};
use crate::{ApiError, ApiState, validate};

/// The most messages one publication of a batching destination carries.
const MAX_BATCH: u16 = 1000;
/// The longest a batch waits to fill, in seconds.
const MAX_WAIT_SECS: u16 = 300;

/// Svix's `DestinationIn`: body of create (POST) and replace (PUT).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DestinationIn {
    uid: Option<String>,
    /// `enabled` (the default) or `disabled`.
    status: Option<String>,
    batch_size: Option<u16>,
    max_wait_secs: Option<u16>,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    #[serde(default, deserialize_with = "metadata")]
    metadata: Metadata,
    #[serde(rename = "type")]
    kind: String,
    config: Option<Map<String, Value>>,
}

/// Svix's `DestinationPatch`: `type` must be the destination's; `config` holds the fields
/// that change (`null` clears an optional one).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DestinationPatch {
    #[serde(default, deserialize_with = "patch_field")]
    uid: Option<Option<String>>,
    status: Option<String>,
    #[serde(default, deserialize_with = "patch_field")]
    batch_size: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    max_wait_secs: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "patch_field")]
    channels: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "metadata_patch")]
    metadata: Option<Metadata>,
    #[serde(rename = "type")]
    kind: String,
    config: Option<Map<String, Value>>,
}

/// Svix's `DestinationOut`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationOut {
    id: String,
    uid: Option<String>,
    /// `enabled` or `disabled`.
    status: &'static str,
    /// Why it is disabled, while it is.
    failure_reason: Option<String>,
    /// Where a poller starting now without an iterator starts: the destination's creation.
    current_iterator: String,
    created_at: String,
    updated_at: String,
    batch_size: u16,
    max_wait_secs: u16,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    metadata: Metadata,
    #[serde(rename = "type")]
    kind: &'static str,
    config: Value,
}

impl DestinationOut {
    /// `ep` as the destination routes show it; `keys` are its opened keys.
    pub(super) fn new(ep: Endpoint, keys: &EndpointKeys) -> Self {
        Self {
            id: ep.id.to_string(),
            uid: ep.uid,
            status: if ep.disabled { "disabled" } else { "enabled" },
            failure_reason: ep.disabled_reason,
            current_iterator: start_of(ep.created_at),
            created_at: ep.created_at.to_rfc3339(),
            updated_at: ep.updated_at.to_rfc3339(),
            batch_size: ep.batch_size,
            max_wait_secs: ep.max_wait_secs,
            event_types: ep.event_types,
            channels: ep.channels,
            metadata: ep.metadata,
            kind: config::type_name(&ep.destination),
            config: config::shown(&ep.destination, &ep.url, &ep.headers, keys),
        }
    }
}

/// The iterator of a poll that starts at `at`.
pub(super) fn start_of(at: Timestamp) -> String {
    MessageId::lowest_at(at).to_string()
}

/// `enabled` or `disabled`, as `true` when disabled.
fn disabled(status: &str) -> Result<bool, ApiError> {
    match status {
        "enabled" => Ok(false),
        "disabled" => Ok(true),
        _ => Err(ApiError::body_field(
            "status",
            "must be enabled or disabled",
        )),
    }
}

/// The common fields' checks.
fn check_common(
    batch_size: Option<u16>,
    max_wait_secs: Option<u16>,
    event_types: Option<&[String]>,
    channels: Option<&[String]>,
) -> Result<(), ApiError> {
    if batch_size.is_some_and(|n| !(1..=MAX_BATCH).contains(&n)) {
        return Err(ApiError::body_field(
            "batchSize",
            format!("must be between 1 and {MAX_BATCH}"),
        ));
    }
    if max_wait_secs.is_some_and(|secs| secs > MAX_WAIT_SECS) {
        return Err(ApiError::body_field(
            "maxWaitSecs",
            format!("must be between 0 and {MAX_WAIT_SECS} seconds"),
        ));
    }
    validate::event_types("eventTypes", event_types)?;
    validate::channels("channels", channels)
}

impl DestinationIn {
    /// Checks the body and reads its `type` and `config`.
    pub(super) fn parse(&self, state: &ApiState) -> Result<Parsed, ApiError> {
        validate::uid("uid", self.uid.as_deref())?;
        self.status.as_deref().map(disabled).transpose()?;
        check_common(
            self.batch_size,
            self.max_wait_secs,
            self.event_types.as_deref(),
            self.channels.as_deref(),
        )?;
        let empty = Map::new();
        let config = self.config.as_ref().unwrap_or(&empty);
        config::parse(&self.kind, config, state.config().allow_http_endpoints)
    }

    /// A new destination of `app` from the body and its `parsed` config, its keys sealed.
    pub(super) fn into_new(
        self,
        parsed: Parsed,
        app: &Application,
        state: &ApiState,
    ) -> Result<Endpoint, ApiError> {
        let now = state.clock().now();
        let id = EndpointId::new(now);
        let mut keys = EndpointKeys::new(&[Scheme::V1], parsed.key)
            .map_err(|e| ApiError::body_field("config.key", e.to_string()))?;
        let rule = &state.config().credential_headers;
        let (headers, credentials) = rule.split(parsed.headers.unwrap_or_default());
        keys.set_headers(credentials);
        keys.set_destination_secrets(parsed.secrets);
        let keys = keys.seal(state.keyring(), &id);
        let mut ep = Endpoint {
            id,
            app_id: app.id.clone(),
            uid: self.uid,
            url: parsed.url,
            description: String::new(),
            event_types: self.event_types,
            channels: self.channels,
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: None,
            timeout_secs: None,
            max_concurrency: None,
            ordering: ordering_of(&parsed.destination),
            metadata: self.metadata,
            headers,
            keys,
            created_at: now,
            updated_at: now,
            destination: parsed.destination,
            batch_size: self.batch_size.unwrap_or(1),
            max_wait_secs: self.max_wait_secs.unwrap_or(0),
        };
        let off = self.status.as_deref().map(disabled).transpose()?;
        set_disabled(&mut ep, off.unwrap_or(false), now);
        Ok(ep)
    }

    /// Replaces `ep`'s fields with the body's (PUT): what changes in its sealed keys is
    /// returned. An existing destination keeps its signing key (its secret/rotate route
    /// changes it).
    pub(super) fn replace(
        self,
        parsed: Parsed,
        ep: &mut Endpoint,
        state: &ApiState,
    ) -> Result<SealedChange, ApiError> {
        let now = state.clock().now();
        ep.uid = self.uid;
        let off = self.status.as_deref().map(disabled).transpose()?;
        set_disabled(ep, off.unwrap_or(false), now);
        ep.batch_size = self.batch_size.unwrap_or(1);
        ep.max_wait_secs = self.max_wait_secs.unwrap_or(0);
        ep.event_types = self.event_types;
        ep.channels = self.channels;
        ep.metadata = self.metadata;
        Ok(take_config(ep, parsed, true, state))
    }
}

impl DestinationPatch {
    /// Writes the body's fields onto `ep`, reading its `config` laid over the stored one;
    /// returns what changes in its sealed keys.
    pub(super) fn apply(
        self,
        ep: &mut Endpoint,
        keys: &EndpointKeys,
        state: &ApiState,
    ) -> Result<SealedChange, ApiError> {
        let stored = config::type_name(&ep.destination);
        if self.kind != stored {
            config::served(&self.kind)?;
            return Err(ApiError::body_field(
                "type",
                format!("this destination is a {stored}; a destination's type does not change"),
            ));
        }
        if let Some(uid) = &self.uid {
            validate::uid("uid", uid.as_deref())?;
        }
        let status = self.status.as_deref().map(disabled).transpose()?;
        check_common(
            self.batch_size.flatten(),
            self.max_wait_secs.flatten(),
            self.event_types.as_ref().and_then(Option::as_deref),
            self.channels.as_ref().and_then(Option::as_deref),
        )?;
        let mut config = config::as_input(&ep.destination, &ep.url, keys);
        for (field, value) in self.config.unwrap_or_default() {
            match value {
                Value::Null => config.remove(&field),
                value => config.insert(field, value),
            };
        }
        let parsed = config::parse(&self.kind, &config, state.config().allow_http_endpoints)?;
        if let Some(uid) = self.uid {
            ep.uid = uid;
        }
        if let Some(off) = status {
            set_disabled(ep, off, state.clock().now());
        }
        if let Some(size) = self.batch_size {
            ep.batch_size = size.unwrap_or(1);
        }
        if let Some(wait) = self.max_wait_secs {
            ep.max_wait_secs = wait.unwrap_or(0);
        }
        if let Some(event_types) = self.event_types {
            ep.event_types = event_types;
        }
        if let Some(channels) = self.channels {
            ep.channels = channels;
        }
        if let Some(metadata) = self.metadata {
            ep.metadata = metadata;
        }
        Ok(take_config(ep, parsed, false, state))
    }
}

/// A `fifoEndpoint` receives its messages one at a time, in publish order.
fn ordering_of(destination: &Destination) -> Ordering {
    match destination {
        Destination::Fifo => Ordering::Strict,
        _ => Ordering::PerKey,
    }
}

/// Puts `parsed` on `ep`: its kind, URL and clear headers; returns the sealed part (its
/// credentials, and its credential headers when given, or when `replace` drops them).
fn take_config(ep: &mut Endpoint, parsed: Parsed, replace: bool, state: &ApiState) -> SealedChange {
    ep.ordering = ordering_of(&parsed.destination);
    ep.destination = parsed.destination;
    ep.url = parsed.url;
    let headers = match parsed.headers {
        Some(all) => Some(place(state, ep, all)),
        None if replace => Some(place(state, ep, BTreeMap::new())),
        None => None,
    };
    SealedChange {
        headers,
        destination: Some(parsed.secrets),
        ..SealedChange::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::described::{assert_reads_as_described, assert_shows_as_described};

    #[test]
    fn the_openapi_document_describes_every_field_the_destination_routes_read_and_show() {
        assert_reads_as_described::<DestinationIn>("DestinationIn");
        assert_reads_as_described::<DestinationPatch>("DestinationPatch");
        let some = |s: &str| Some(s.to_owned());
        let out = DestinationOut {
            id: "ep_1".into(),
            uid: some("queue"),
            status: "disabled",
            failure_reason: some("disabled through the API"),
            current_iterator: "msg_0".into(),
            created_at: "2026-01-01T00:00:00+00:00".into(),
            updated_at: "2026-01-01T00:00:00+00:00".into(),
            batch_size: 1,
            max_wait_secs: 0,
            event_types: Some(vec!["user.signup".into()]),
            channels: Some(vec!["project_1".into()]),
            metadata: Metadata::new(),
            kind: "pollingEndpoint",
            config: Value::Object(Map::new()),
        };
        assert_shows_as_described("DestinationOut", &out);
    }
}
