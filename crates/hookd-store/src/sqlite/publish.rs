//! Publishing on SQLite (`crate::sql::messages::Publish`): a message, its deliveries and the
//! handoff of those its engine takes are one job of the writer.

use async_trait::async_trait;
use hookd_core::model::{Application, Delivery, DeliveryStatus, Endpoint, Message, Ordering};
use hookd_core::{AppId, EndpointId, Timestamp};
use rusqlite::params;

use super::rows::{self, ENDPOINT_COLUMNS, Prepare, fetch, fetch_one, run};
use super::writer::Tx;
use super::{SqliteStore, missing, refused};
use crate::error::taken;
use crate::sql::applications;
use crate::sql::messages::{self as sql, Publish, Subscriber};
use crate::sql::{Sql, Statement, args, sql};
use crate::{ClaimedDelivery, CreatedMessage, Handoff, NewMessage, Reserved, Route, StoreError};

#[async_trait]
impl Publish for SqliteStore {
    async fn publish_message(&self, new: NewMessage) -> Result<CreatedMessage, StoreError> {
        self.write_publish(move |conn, handoff| insert_new(conn, &new, handoff))
            .await
    }
}

/// Writes `new` inside the caller's write. Its deliveries are offered to `handoff` only when
/// they may go to the engine at once (see [`NewMessage::handed_at_once`]).
fn insert_new(
    conn: &Tx<'_>,
    new: &NewMessage,
    handoff: Option<&dyn Handoff>,
) -> Result<Written, StoreError> {
    let handoff = handoff.filter(|_| new.handed_at_once());
    let in_app;
    let message = match &new.app {
        None => &new.message,
        Some(app) => {
            in_app = Message {
                app_id: get_or_create_app(conn, app)?,
                ..new.message.clone()
            };
            &in_app
        }
    };
    let written = insert_message(conn, message, &new.route, handoff)?;
    if let Some(at) = new.payload_expires_at {
        run(conn, &sql::set_expiry(&message.id, at))?;
    }
    if let Some(due) = message.deliver_at {
        run(conn, &sql::schedule(&message.id, due))?;
    }
    Ok(written)
}

/// The id of the application whose uid is `app`'s, made from `app` in the caller's write when
/// there is none (`app` itself when it has no uid).
fn get_or_create_app(conn: &Tx<'_>, app: &Application) -> Result<AppId, StoreError> {
    run(conn, &applications::insert_unless_uid_taken(app))?;
    fetch_one(conn, &applications::id_of_uid(app), applications::app_id)?
        .ok_or(StoreError::NotFound("application"))
}

impl SqliteStore {
    /// Writes a message with `write`, offering its deliveries to the store's [`Handoff`], and
    /// hands off those it took once committed. Write and handoff run in a task of their own:
    /// a caller that goes away meanwhile (a cancelled request) must not leave the deliveries
    /// it wrote claimed and idle until their lease ends.
    pub(super) async fn write_publish<F>(&self, write: F) -> Result<CreatedMessage, StoreError>
    where
        F: Fn(&Tx<'_>, Option<&dyn Handoff>) -> Result<Written, StoreError> + Send + 'static,
    {
        let (db, handoff) = (self.db.clone(), self.handoff());
        let published = tokio::spawn(async move {
            let written = db
                .write(move |conn| write(conn, handoff.as_deref()))
                .await?;
            Ok(written.start())
        });
        published
            .await
            .map_err(|e| StoreError::Unavailable(format!("the publish task failed: {e}")))?
    }
}

/// A message just written, with the deliveries a [`Handoff`] took.
pub(super) struct Written {
    pub created: CreatedMessage,
    handed: Vec<(ClaimedDelivery, Reserved)>,
}

impl Written {
    /// Hands the taken deliveries over: call once the write is committed.
    pub(super) fn start(self) -> CreatedMessage {
        for (claimed, reserved) in self.handed {
            reserved.start(claimed);
        }
        self.created
    }
}

/// Whether a deleted message's `eventId` is still taken for its application (the unique key on
/// `messages` covers the messages still there).
fn event_id_spent(conn: &Tx<'_>, app: &AppId, event_id: &str) -> Result<bool, StoreError> {
    let spent = "SELECT EXISTS (SELECT 1 FROM spent_event_ids WHERE app_id = ?1 AND event_id = ?2)";
    let spent = conn.prepared(spent, |spent| {
        spent.query_row(params![app.as_str(), event_id], |row| row.get(0))
    })?;
    Ok(spent)
}

/// Writes `message` and its deliveries. Those `handoff` takes are written claimed (`sending`
/// until their lease ends) and returned, to hand off once committed; the rest are due at once.
pub(super) fn insert_message(
    conn: &Tx<'_>,
    message: &Message,
    route: &Route,
    handoff: Option<&dyn Handoff>,
) -> Result<Written, StoreError> {
    if let Some(event_id) = &message.event_id
        && event_id_spent(conn, &message.app_id, event_id)?
    {
        return Err(StoreError::Conflict(taken::event_id(Some(event_id))));
    }
    // The refusal's text is made only for a refusal: this runs for every message.
    run(conn, &sql::insert(message)).map_err(|error| {
        let taken = taken::event_id(message.event_id.as_deref());
        refused(taken, "application")(error)
    })?;
    // A delivery to one named endpoint (a test send) keeps the message's own key, whatever the
    // endpoint's ordering.
    let routed = match route {
        Route::Subscribers => subscribers(conn, message)?,
        Route::Only(endpoint) => vec![(endpoint.clone(), Ordering::PerKey)],
    };
    let mut handed = Vec::new();
    let mut waiting = 0;
    for (endpoint, ordering) in &routed {
        let ordering_key = ordering.key_of(message.ordering_key.as_deref());
        if let Some(key) = &ordering_key
            && key_is_busy(conn, endpoint, key)?
        {
            let wait = params![
                message.id.as_str(),
                endpoint.as_str(),
                DeliveryStatus::Pending.code(),
                None::<i64>,
                message.created_at.as_millis(),
                key,
            ];
            insert_delivery(conn, wait)?;
            waiting += 1;
            continue;
        }
        let taken = match handoff {
            Some(handoff) => taken(conn, handoff, endpoint)?,
            None => None,
        };
        let delivery = Delivery {
            message_id: message.id.clone(),
            endpoint_id: endpoint.clone(),
            status: match taken {
                Some(_) => DeliveryStatus::Sending,
                None => DeliveryStatus::Pending,
            },
            attempt_count: 0,
            next_attempt_at: Some(
                taken
                    .as_ref()
                    .map_or(message.created_at, |(_, reserved)| reserved.lease_until()),
            ),
            updated_at: message.created_at,
            ordering_key,
        };
        let row = params![
            message.id.as_str(),
            endpoint.as_str(),
            delivery.status.code(),
            delivery.next_attempt_at.map(Timestamp::as_millis),
            delivery.updated_at.as_millis(),
            delivery.ordering_key,
        ];
        insert_delivery(conn, row)?;
        if let Some((endpoint, reserved)) = taken {
            let claimed = ClaimedDelivery {
                delivery,
                message: message.clone(),
                endpoint,
                manual: false,
            };
            handed.push((claimed, reserved));
        }
    }
    Ok(Written {
        created: CreatedMessage {
            message: message.clone(),
            deliveries: routed.len(),
            queued: routed.len() - handed.len() - waiting,
        },
        handed,
    })
}

/// Inserts one delivery, binding message, endpoint, status, when it is due (NULL: waiting
/// behind its key), when it was written and its ordering key. SQLite writes deliveries row by
/// row: its one writer has no lock to take for them.
pub(super) const INSERT_DELIVERY: &str = "INSERT INTO deliveries (message_id, endpoint_id,
     status, attempt_count, next_attempt_at, updated_at, ordering_key)
     VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)";

/// Inserts one delivery, `row` bound to [`INSERT_DELIVERY`].
fn insert_delivery(conn: &Tx<'_>, row: &[&dyn rusqlite::ToSql]) -> Result<(), StoreError> {
    conn.prepared(INSERT_DELIVERY, |insert| insert.execute(row))
        .map_err(missing("endpoint"))?;
    Ok(())
}

/// The endpoint and the room `handoff` holds for a new delivery to it, if it takes one. Only an
/// enabled endpoint's deliveries go out: a test send may name a disabled one, which then waits.
fn taken(
    conn: &Tx<'_>,
    handoff: &dyn Handoff,
    endpoint: &EndpointId,
) -> Result<Option<(Endpoint, Reserved)>, StoreError> {
    let Some(reserved) = handoff.reserve(endpoint) else {
        return Ok(None);
    };
    let enabled = endpoint_row(conn, endpoint.as_str())?.filter(|e| !e.disabled);
    Ok(enabled.map(|endpoint| (endpoint, reserved)))
}

/// The row of endpoint `id`, read once a batch (`super::reads`).
pub(super) fn endpoint_row(conn: &Tx<'_>, id: &str) -> Result<Option<Endpoint>, StoreError> {
    const ENDPOINT: Sql = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        " FROM endpoints e WHERE e.id = ?1"
    );
    conn.reads.endpoint(id, || {
        fetch_one(conn, &Statement::new(ENDPOINT, args![id]), rows::endpoint)
    })
}

/// Writes operational-webhook messages, each with its deliveries, inside the caller's write.
pub(super) fn insert_events(conn: &Tx<'_>, events: &[Message]) -> Result<(), StoreError> {
    for event in events {
        insert_message(conn, event, &Route::Subscribers, None)?;
    }
    Ok(())
}

/// Whether `endpoint` has an unsettled delivery ordered under `key`: one queued, or waiting.
fn key_is_busy(conn: &Tx<'_>, endpoint: &EndpointId, key: &str) -> Result<bool, StoreError> {
    const BUSY: &str = "SELECT EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = ?1
                            AND ordering_key = ?2 AND next_attempt_at IS NOT NULL)
                 OR EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = ?1 AND ordering_key = ?2
                            AND next_attempt_at IS NULL AND status = ?3)";
    let busy = conn.prepared(BUSY, |busy| {
        busy.query_row(
            params![endpoint.as_str(), key, DeliveryStatus::Pending.code()],
            |row| row.get(0),
        )
    })?;
    Ok(busy)
}

/// The enabled endpoints of the message's application whose filters take it, with their
/// ordering. The application's subscribers are read once a batch (`super::reads`).
fn subscribers(
    conn: &Tx<'_>,
    message: &Message,
) -> Result<Vec<(EndpointId, Ordering)>, StoreError> {
    let app = &message.app_id;
    let subscribers = conn.reads.subscribers(app.as_str(), || {
        fetch(conn, &sql::subscribers(app), Subscriber::from_row)
    })?;
    Ok(subscribers
        .iter()
        .filter(|s| s.takes(message))
        .map(|s| (EndpointId::from_stored(s.id.clone()), s.ordering))
        .collect())
}

#[cfg(test)]
mod tests {
    use hookd_core::MessageId;

    use super::super::writer::{TWO_MESSAGES_TO_ONE_ENDPOINT, migrated};
    use super::*;

    /// The endpoints a message of `app_1` is routed to.
    fn routed(tx: &Tx<'_>) -> Vec<String> {
        let message = Message {
            id: MessageId::from_stored("msg_3".into()),
            app_id: AppId::from_stored("app_1".into()),
            event_type: "t".into(),
            event_id: None,
            channels: None,
            ordering_key: None,
            tags: None,
            deliver_at: None,
            payload: None,
            created_at: Timestamp::from_millis(0),
        };
        let routed = subscribers(tx, &message).unwrap();
        routed.into_iter().map(|(id, _)| id.to_string()).collect()
    }

    #[test]
    fn endpoints_read_in_a_batch_are_read_again_once_a_job_writes_one() {
        let dir = tempfile::tempdir().unwrap();
        let conn = migrated(&dir.path().join("hookd.db"));
        conn.execute_batch(TWO_MESSAGES_TO_ONE_ENDPOINT).unwrap();
        let tx = Tx::watching(&conn);
        let disabled = |tx: &Tx<'_>| endpoint_row(tx, "ep_1").unwrap().map(|e| e.disabled);
        assert_eq!(
            (routed(&tx), disabled(&tx)),
            (vec!["ep_1".into()], Some(false))
        );

        tx.execute_batch("UPDATE endpoints SET disabled = 1 WHERE id = 'ep_1'")
            .unwrap();
        assert_eq!((routed(&tx), disabled(&tx)), (vec![], Some(true)));

        tx.execute_batch(
            "UPDATE endpoints SET disabled = 0 WHERE id = 'ep_1';
             INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                 secret, created_at, updated_at)
                 VALUES ('ep_2', 'app_1', 'http://localhost/', '', 0, '{}', '{}', 's', 0, 0);",
        )
        .unwrap();
        assert_eq!(routed(&tx), ["ep_1", "ep_2"]);

        // Deleting the application deletes its endpoints by cascade: that is a write too.
        tx.execute_batch("DELETE FROM applications WHERE id = 'app_1'")
            .unwrap();
        assert_eq!((routed(&tx), disabled(&tx)), (vec![], None));
    }
}
