//! Operational webhooks: the events hookd tells its operator about (an endpoint created,
//! changed, deleted, disabled or enabled; a message failing, exhausted or recovered), shaped as
//! Svix's operational webhooks.
//!
//! They are ordinary messages of one reserved application ([`APP_UID`]), so operators
//! subscribe with ordinary endpoints and `filterTypes`, and the engine delivers them like any
//! other message (signed, retried, behind the SSRF guard). This module only says what an event
//! is and which bytes it becomes; who writes it, and in which transaction, is the API's and the
//! engine's business (always the transaction of the change it tells of).

use serde_json::{Map, Value, json};

use crate::model::{Application, Attempt, Endpoint, Message};
use crate::{AppId, EndpointId, MessageId, Timestamp};

/// The uid of the application whose endpoints receive operational webhooks.
pub const APP_UID: &str = "hookd-operations";

/// The name the operations application is created with.
pub const APP_NAME: &str = "hookd operational webhooks";

/// Every operational event type with its description, for the event-type catalogue.
pub const EVENT_TYPES: [(&str, &str); 8] = [
    ("endpoint.created", "An endpoint was created."),
    ("endpoint.updated", "An endpoint was changed."),
    ("endpoint.deleted", "An endpoint was deleted."),
    (
        "endpoint.disabled",
        "An endpoint was disabled: by hookd (it answered 410 Gone, or failed for days), or through the API.",
    ),
    (
        "endpoint.enabled",
        "A disabled endpoint was enabled through the API.",
    ),
    (
        "message.attempt.exhausted",
        "A message's last scheduled attempt to an endpoint failed: no more retries.",
    ),
    (
        "message.attempt.failing",
        "A message has failed several attempts in a row to an endpoint (still retrying).",
    ),
    (
        "message.attempt.recovered",
        "A message that was failing to an endpoint was delivered.",
    ),
];

/// The application and endpoint an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointRef {
    pub app_id: AppId,
    pub app_uid: Option<String>,
    pub endpoint_id: EndpointId,
    pub endpoint_uid: Option<String>,
}

impl EndpointRef {
    pub fn new(app: &Application, endpoint: &Endpoint) -> Self {
        Self {
            app_id: app.id.clone(),
            app_uid: app.uid.clone(),
            endpoint_id: endpoint.id.clone(),
            endpoint_uid: endpoint.uid.clone(),
        }
    }
}

/// The attempt a `message.attempt.*` event is about.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRef {
    pub app_id: AppId,
    pub app_uid: Option<String>,
    pub endpoint_id: EndpointId,
    pub msg_id: MessageId,
    pub msg_event_id: Option<String>,
    /// The attempt that caused the event (its id, time and HTTP status, 0 if none).
    pub attempt: Attempt,
}

/// Which `message.attempt.*` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptEvent {
    /// The retry schedule ran out (`message.attempt.exhausted`).
    Exhausted,
    /// Several attempts in a row failed; retries go on (`message.attempt.failing`).
    Failing,
    /// A success after `Failing` was told (`message.attempt.recovered`).
    Recovered,
}

/// Who disabled an endpoint: Svix's `trigger` of `endpoint.disabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisableTrigger {
    /// hookd, after a `410 Gone` or days of failures (`"automatic"`).
    Automatic,
    /// A caller of the API (`"manual"`).
    Manual,
}

impl DisableTrigger {
    /// The `trigger` value, as Svix spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::Manual => "manual",
        }
    }
}

/// One operational event.
#[derive(Clone, Debug, PartialEq)]
pub enum OperationalEvent {
    EndpointCreated(EndpointRef),
    EndpointUpdated(EndpointRef),
    EndpointDeleted(EndpointRef),
    /// The endpoint was disabled by `trigger`, for `reason` (a hookd addition); its failures
    /// began at `fail_since`, when hookd knows.
    EndpointDisabled {
        endpoint: EndpointRef,
        fail_since: Option<Timestamp>,
        trigger: DisableTrigger,
        reason: String,
    },
    /// A disabled endpoint was enabled.
    EndpointEnabled(EndpointRef),
    Attempt(AttemptEvent, AttemptRef),
}

impl OperationalEvent {
    /// The event type, as endpoints filter on it.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::EndpointCreated(_) => "endpoint.created",
            Self::EndpointUpdated(_) => "endpoint.updated",
            Self::EndpointDeleted(_) => "endpoint.deleted",
            Self::EndpointDisabled { .. } => "endpoint.disabled",
            Self::EndpointEnabled(_) => "endpoint.enabled",
            Self::Attempt(AttemptEvent::Exhausted, _) => "message.attempt.exhausted",
            Self::Attempt(AttemptEvent::Failing, _) => "message.attempt.failing",
            Self::Attempt(AttemptEvent::Recovered, _) => "message.attempt.recovered",
        }
    }

    /// The event's `data`, with Svix's field names; absent uids are left out, as Svix does.
    fn data(&self) -> Value {
        let mut data = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                data.insert(key.to_owned(), value);
            }
        };
        match self {
            Self::EndpointCreated(ep)
            | Self::EndpointUpdated(ep)
            | Self::EndpointDeleted(ep)
            | Self::EndpointEnabled(ep) => {
                put_endpoint(&mut put, ep);
            }
            Self::EndpointDisabled {
                endpoint,
                fail_since,
                trigger,
                reason,
            } => {
                put_endpoint(&mut put, endpoint);
                put("failSince", fail_since.map(|t| json!(t.to_rfc3339())));
                put("trigger", Some(json!(trigger.as_str())));
                put("reason", Some(json!(reason)));
            }
            Self::Attempt(_, a) => {
                put("appId", Some(json!(a.app_id)));
                put("appUid", a.app_uid.as_ref().map(|u| json!(u)));
                put("endpointId", Some(json!(a.endpoint_id)));
                put("msgId", Some(json!(a.msg_id)));
                put("msgEventId", a.msg_event_id.as_ref().map(|e| json!(e)));
                put(
                    "lastAttempt",
                    Some(json!({
                        "id": a.attempt.id,
                        "timestamp": a.attempt.created_at.to_rfc3339(),
                        "responseStatusCode": a.attempt.response_status_code,
                    })),
                );
            }
        }
        Value::Object(data)
    }

    /// The message of the operations application `operations` that carries this event,
    /// created `at`: `{"type", "timestamp", "data"}`.
    pub fn message(&self, operations: &AppId, at: Timestamp) -> Message {
        let envelope = json!({
            "type": self.event_type(),
            "timestamp": at.to_rfc3339(),
            "data": self.data(),
        });
        Message {
            id: MessageId::new(at),
            app_id: operations.clone(),
            event_type: self.event_type().to_owned(),
            event_id: None,
            channels: None,
            ordering_key: None,
            tags: None,
            deliver_at: None,
            payload: Some(envelope.to_string().into_bytes()),
            created_at: at,
        }
    }
}

fn put_endpoint(put: &mut impl FnMut(&str, Option<Value>), ep: &EndpointRef) {
    put("appId", Some(json!(ep.app_id)));
    put("appUid", ep.app_uid.as_ref().map(|u| json!(u)));
    put("endpointId", Some(json!(ep.endpoint_id)));
    put("endpointUid", ep.endpoint_uid.as_ref().map(|u| json!(u)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttemptId;
    use crate::model::{DeliveryStatus, TriggerType};

    fn at() -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000)
    }

    fn envelope(event: &OperationalEvent) -> Value {
        let message = event.message(&AppId::from_stored("app_ops".into()), at());
        assert_eq!(message.event_type, event.event_type());
        serde_json::from_slice(message.payload.as_deref().unwrap()).unwrap()
    }

    fn endpoint_ref() -> EndpointRef {
        EndpointRef {
            app_id: AppId::from_stored("app_1".into()),
            app_uid: Some("acme".into()),
            endpoint_id: EndpointId::from_stored("ep_1".into()),
            endpoint_uid: None,
        }
    }

    #[test]
    fn endpoint_events_carry_svix_fields_and_leave_out_absent_uids() {
        let body = envelope(&OperationalEvent::EndpointDeleted(endpoint_ref()));
        assert_eq!(
            body,
            json!({
                "type": "endpoint.deleted",
                "timestamp": "2023-11-14T22:13:20Z",
                "data": {"appId": "app_1", "appUid": "acme", "endpointId": "ep_1"},
            })
        );
    }

    #[test]
    fn a_disabled_endpoint_says_why_and_since_when() {
        let body = envelope(&OperationalEvent::EndpointDisabled {
            endpoint: endpoint_ref(),
            fail_since: Some(at()),
            trigger: DisableTrigger::Automatic,
            reason: "the endpoint answered 410 Gone".into(),
        });
        assert_eq!(body["type"], "endpoint.disabled");
        assert_eq!(body["data"]["failSince"], "2023-11-14T22:13:20Z");
        assert_eq!(body["data"]["trigger"], "automatic");
        assert_eq!(body["data"]["reason"], "the endpoint answered 410 Gone");
    }

    #[test]
    fn an_endpoint_disabled_through_the_api_is_manual_and_has_no_fail_since() {
        let body = envelope(&OperationalEvent::EndpointDisabled {
            endpoint: endpoint_ref(),
            fail_since: None,
            trigger: DisableTrigger::Manual,
            reason: "disabled through the API".into(),
        });
        assert_eq!(
            body["data"],
            json!({
                "appId": "app_1",
                "appUid": "acme",
                "endpointId": "ep_1",
                "trigger": "manual",
                "reason": "disabled through the API",
            })
        );
    }

    #[test]
    fn an_enabled_endpoint_is_named_as_svix_names_it() {
        let body = envelope(&OperationalEvent::EndpointEnabled(endpoint_ref()));
        assert_eq!(body["type"], "endpoint.enabled");
        assert_eq!(
            body["data"],
            json!({"appId": "app_1", "appUid": "acme", "endpointId": "ep_1"})
        );
    }

    #[test]
    fn attempt_events_name_the_last_attempt() {
        let attempt = Attempt {
            id: AttemptId::from_stored("atmpt_1".into()),
            message_id: MessageId::from_stored("msg_1".into()),
            endpoint_id: EndpointId::from_stored("ep_1".into()),
            url: "https://example.com".into(),
            response_status_code: 503,
            response: String::new(),
            response_head: String::new(),
            response_duration_ms: 3,
            status: DeliveryStatus::Fail,
            trigger_type: TriggerType::Scheduled,
            created_at: at(),
        };
        let event = OperationalEvent::Attempt(
            AttemptEvent::Exhausted,
            AttemptRef {
                app_id: AppId::from_stored("app_1".into()),
                app_uid: None,
                endpoint_id: attempt.endpoint_id.clone(),
                msg_id: attempt.message_id.clone(),
                msg_event_id: Some("order-1".into()),
                attempt,
            },
        );
        assert_eq!(
            envelope(&event)["data"],
            json!({
                "appId": "app_1",
                "endpointId": "ep_1",
                "msgId": "msg_1",
                "msgEventId": "order-1",
                "lastAttempt": {
                    "id": "atmpt_1",
                    "timestamp": "2023-11-14T22:13:20Z",
                    "responseStatusCode": 503,
                },
            })
        );
    }
}
