//! What both implementations of the outbox relay share: a waiting row, the checks it must
//! pass before it becomes a message, and the message it becomes.

use hookd_core::envelope::Envelope;
use hookd_core::model::Message;
use hookd_core::{AppId, MessageId, Timestamp};
use serde::de::IgnoredAny;

use crate::RelayRules;

/// The notification channel producers' commits signal (a trigger on the outbox table).
pub const OUTBOX_CHANNEL: &str = "hookd_outbox";
/// The notification channel on which processes announce new deliveries to each other.
pub const DELIVERIES_CHANNEL: &str = "hookd_deliveries";

/// An outbox row waiting to be relayed: hookd's own outbox table's, or an outbox source's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxRow {
    /// The row's id in its table.
    pub id: i64,
    /// The application's id or uid.
    pub app: String,
    pub event_type: String,
    pub payload: String,
    pub event_id: Option<String>,
    pub channels: Option<Vec<String>>,
    pub ordering_key: Option<String>,
    /// A column that could not be read as the contract says, found while loading the row.
    pub problem: Option<String>,
}

/// An outbox row as PostgreSQL and MySQL select it: id, app (NULL in a bound source's row),
/// event type, payload text, event id, channels as JSON text, ordering key.
pub type OutboxColumns = (
    i64,
    Option<String>,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl From<OutboxColumns> for OutboxRow {
    /// A NULL app is left empty (for the source relay's binding, or refused as unknown).
    fn from(columns: OutboxColumns) -> Self {
        let (id, app, event_type, payload, event_id, channels, key) = columns;
        let app = app.unwrap_or_default();
        Self::from_columns(
            id,
            app,
            event_type,
            payload,
            event_id,
            channels.as_deref(),
            key,
        )
    }
}

impl OutboxRow {
    /// A row from its columns as read, `channels` as JSON text (see [`Self::with_channels_json`]).
    pub fn from_columns(
        id: i64,
        app: String,
        event_type: String,
        payload: String,
        event_id: Option<String>,
        channels: Option<&str>,
        ordering_key: Option<String>,
    ) -> Self {
        Self {
            id,
            app,
            event_type,
            payload,
            event_id,
            channels: None,
            ordering_key,
            problem: None,
        }
        .with_channels_json(channels)
    }

    /// Sets the channels from a JSON list of strings (or NULL); anything else is the row's
    /// problem, kept on it.
    pub fn with_channels_json(mut self, channels: Option<&str>) -> Self {
        match channels
            .map(serde_json::from_str::<Vec<String>>)
            .transpose()
        {
            Ok(channels) => self.channels = channels,
            Err(_) => self.problem = Some("channels: must be a list of channel names".into()),
        }
        self
    }

    /// Checks the row by the API's rules for a published message (those the database alone
    /// can answer, application and event type, are the caller's). The error is kept on the
    /// row for whoever inspects it.
    pub fn check(&self, rules: &RelayRules) -> Result<(), String> {
        if let Some(problem) = &self.problem {
            return Err(problem.clone());
        }
        let payload = self.payload();
        if serde_json::from_str::<IgnoredAny>(payload).is_err() {
            return Err("payload: is not valid JSON".into());
        }
        hookd_core::validate::message(
            &self.event_type,
            self.event_id.as_deref(),
            self.channels.as_deref(),
            self.ordering_key.as_deref(),
            payload,
            rules.max_payload_bytes,
        )
        .map_err(|e| e.to_string())
    }

    /// The payload text without surrounding whitespace: the bytes receivers get.
    pub fn payload(&self) -> &str {
        self.payload.trim_matches([' ', '\t', '\n', '\r'])
    }

    /// The message this row becomes in application `app`, with id `id` (a pass's rows take
    /// theirs from one [`MessageId::run`], so that their ids keep the rows' order); its
    /// payload inside the Standard Webhooks envelope where `enveloped` (the application or
    /// the event type asks for it), stamped with the time of the relay.
    pub fn message(
        &self,
        id: MessageId,
        (app, enveloped): (AppId, bool),
        now: Timestamp,
    ) -> Message {
        let payload = if enveloped {
            let envelope = Envelope {
                event_type: &self.event_type,
                occurred_at: now,
                test: false,
            };
            envelope.around(self.payload())
        } else {
            self.payload().as_bytes().to_vec()
        };
        Message {
            id,
            app_id: app,
            event_type: self.event_type.clone(),
            event_id: self.event_id.clone(),
            channels: self.channels.clone(),
            ordering_key: self.ordering_key.clone(),
            tags: None,
            deliver_at: None,
            payload: Some(payload),
            created_at: now,
        }
    }
}

/// Why a row is refused in strict mode, given its event type's `archived` and `schemas` (JSON
/// text) if the catalog has it: unknown, archived, or a payload its newest schema refuses.
pub fn strict_event_type(
    found: Option<(bool, Option<String>)>,
    row: &OutboxRow,
) -> Result<(), String> {
    match found {
        None => Err("eventType: no event type of this name exists".into()),
        Some((true, _)) => Err("eventType: this event type is archived".into()),
        Some((false, None)) => Ok(()),
        Some((false, Some(schemas))) => {
            let schemas: serde_json::Value = serde_json::from_str(&schemas)
                .map_err(|e| format!("eventType: its schemas are not JSON: {e}"))?;
            let payload: serde_json::Value = serde_json::from_str(row.payload())
                .map_err(|_| "payload: is not valid JSON".to_owned())?;
            hookd_core::schema::check_payload(&row.event_type, &schemas, &payload)
                .map_err(|why| format!("payload: {why}"))
        }
    }
}

/// The error kept on a row naming an application that does not exist.
pub fn unknown_app(app: &str) -> String {
    format!("app: no application has the id or uid {app:?}")
}
