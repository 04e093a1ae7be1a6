//! The engine's operational webhooks: the messages that tell the operator of a delivery
//! failing, exhausted or recovered, or of an endpoint hookd disabled (see
//! [`hookd_core::operations`]).
//!
//! They are built here and handed to the store with the state change that causes them (the
//! attempt's record, the endpoint's disabling), which writes both in one transaction: a crash
//! loses neither one without the other. Nothing is told about the operations application's own
//! deliveries (its endpoints failing would otherwise feed themselves), nor when the operations
//! application does not exist.

use std::collections::HashMap;
use std::sync::Arc;

use hookd_core::model::Message;
use hookd_core::operations::{self, AttemptRef, DisableTrigger, EndpointRef, OperationalEvent};
use hookd_core::{AppId, Timestamp};
use hookd_store::{Store, StoreError};

use crate::pipeline::attempt::Verdict;

/// Looks up what operational webhooks name (the operations application, applications' uids)
/// and builds their messages. Lookups happen only when there is something to tell, which is
/// rare beside attempts.
pub struct Operations {
    store: Arc<dyn Store>,
}

/// The applications a batch of events names: the operations application, and each one's uid.
struct Names<'a> {
    store: &'a dyn Store,
    operations: AppId,
    uids: HashMap<AppId, Option<String>>,
}

impl Names<'_> {
    async fn uid(&mut self, app: &AppId) -> Result<Option<String>, StoreError> {
        if let Some(uid) = self.uids.get(app) {
            return Ok(uid.clone());
        }
        let uid = self.store.get_app(app.as_str()).await?.and_then(|a| a.uid);
        self.uids.insert(app.clone(), uid.clone());
        Ok(uid)
    }
}

impl Operations {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The names for a batch, or `None` when there is no operations application.
    async fn names(&self) -> Result<Option<Names<'_>>, StoreError> {
        let Some(app) = self.store.get_app(operations::APP_UID).await? else {
            return Ok(None);
        };
        Ok(Some(Names {
            store: self.store.as_ref(),
            operations: app.id,
            uids: HashMap::new(),
        }))
    }

    /// The messages each verdict's `message.attempt.*` notice becomes, in order.
    pub async fn attempt_events<'v>(
        &self,
        verdicts: impl ExactSizeIterator<Item = &'v Verdict>,
    ) -> Result<Vec<Vec<Message>>, StoreError> {
        let mut events = vec![Vec::new(); verdicts.len()];
        let noticed: Vec<_> = verdicts
            .enumerate()
            .filter(|(_, v)| v.notice.is_some())
            .collect();
        if noticed.is_empty() {
            return Ok(events);
        }
        let Some(mut names) = self.names().await? else {
            return Ok(events);
        };
        for (i, verdict) in noticed {
            let Some(kind) = verdict.notice else { continue };
            if verdict.app_id == names.operations {
                continue;
            }
            let event = OperationalEvent::Attempt(
                kind,
                AttemptRef {
                    app_id: verdict.app_id.clone(),
                    app_uid: names.uid(&verdict.app_id).await?,
                    endpoint_id: verdict.attempt.endpoint_id.clone(),
                    msg_id: verdict.attempt.message_id.clone(),
                    msg_event_id: verdict.msg_event_id.clone(),
                    attempt: verdict.attempt.clone(),
                },
            );
            events[i].push(event.message(&names.operations, verdict.attempt.created_at));
        }
        Ok(events)
    }

    /// The `endpoint.disabled` message for the endpoint of `verdict`, disabled for `reason`
    /// after failing since `fail_since` (none for the operations application's own).
    pub async fn disabled_events(
        &self,
        verdict: &Verdict,
        fail_since: Option<Timestamp>,
        reason: &str,
    ) -> Result<Vec<Message>, StoreError> {
        let Some(mut names) = self.names().await? else {
            return Ok(Vec::new());
        };
        if verdict.app_id == names.operations {
            return Ok(Vec::new());
        }
        let event = OperationalEvent::EndpointDisabled {
            endpoint: EndpointRef {
                app_id: verdict.app_id.clone(),
                app_uid: names.uid(&verdict.app_id).await?,
                endpoint_id: verdict.attempt.endpoint_id.clone(),
                endpoint_uid: verdict.endpoint_uid.clone(),
            },
            fail_since,
            trigger: DisableTrigger::Automatic,
            reason: reason.to_owned(),
        };
        Ok(vec![
            event.message(&names.operations, verdict.attempt.created_at),
        ])
    }
}
