//! The API's operational webhooks: the messages that tell the operator an endpoint was
//! created, changed, deleted, disabled or enabled through the API (`endpoint.created`,
//! `endpoint.updated`, `endpoint.deleted`, `endpoint.disabled` with `trigger: "manual"`,
//! `endpoint.enabled`; see [`hookd_core::operations`]). The engine's own `operations` module
//! tells of what happens in delivery.
//!
//! They are built here and handed to the store with the change that causes them, which writes
//! both in one transaction. Nothing is told of changes to the operations application's own
//! endpoints, nor when the operations application does not exist.

use hookd_core::model::{Endpoint, Message};
use hookd_core::operations::{self, DisableTrigger, EndpointRef, OperationalEvent};
use hookd_core::{AppId, Timestamp};

use crate::{ApiError, ApiState, Principal};

/// Why an endpoint disabled through the API is disabled.
pub(crate) const DISABLED_THROUGH_API: &str = "disabled through the API";

/// Who is told of changes to an endpoint: the operations application, and the endpoint as
/// its events name it.
pub(crate) struct Operator {
    operations: AppId,
    endpoint: EndpointRef,
    at: Timestamp,
}

impl Operator {
    /// The operator to tell of a change to `ep`: none for the operations application's own
    /// endpoints, or when there is no operations application.
    pub(crate) async fn of(state: &ApiState, ep: &Endpoint) -> Result<Option<Self>, ApiError> {
        let Some(operations) = state.store().get_app(operations::APP_UID).await? else {
            return Ok(None);
        };
        if ep.app_id == operations.id {
            return Ok(None);
        }
        let app = state.app(&Principal::Admin, ep.app_id.as_str()).await?;
        Ok(Some(Self {
            operations: operations.id,
            endpoint: EndpointRef::new(&app, ep),
            at: state.clock().now(),
        }))
    }

    /// The message carrying `event` about the endpoint.
    pub(crate) fn tell(&self, event: impl FnOnce(EndpointRef) -> OperationalEvent) -> Message {
        event(self.endpoint.clone()).message(&self.operations, self.at)
    }
}

/// The operational webhook telling of a change to `ep` (`endpoint.created`, …), if anyone is
/// told (see [`Operator::of`]).
pub(crate) async fn told(
    state: &ApiState,
    ep: &Endpoint,
    event: fn(EndpointRef) -> OperationalEvent,
) -> Result<Vec<Message>, ApiError> {
    let operator = Operator::of(state, ep).await?;
    Ok(operator.map(|o| o.tell(event)).into_iter().collect())
}

/// What the operator is told if the change that leaves `ep` as it is disabled or enabled it:
/// Svix's `endpoint.disabled` with `trigger: "manual"` (and the reason the endpoint keeps), or
/// `endpoint.enabled`.
pub(crate) fn toggled(ep: &Endpoint) -> impl FnOnce(EndpointRef) -> OperationalEvent {
    let (disabled, reason) = (ep.disabled, ep.disabled_reason.clone());
    move |endpoint| {
        if !disabled {
            return OperationalEvent::EndpointEnabled(endpoint);
        }
        OperationalEvent::EndpointDisabled {
            endpoint,
            fail_since: None,
            trigger: DisableTrigger::Manual,
            reason: reason.unwrap_or_else(|| DISABLED_THROUGH_API.to_owned()),
        }
    }
}

/// Wakes the engine if operational webhooks were written.
pub(crate) fn wake_for(state: &ApiState, events: &[Message]) {
    if !events.is_empty() {
        state.wake_engine();
    }
}
