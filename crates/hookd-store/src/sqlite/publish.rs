//! Publishing on SQLite (`crate::sql::messages::Publish`): a message, its deliveries and the
//! handoff of those its engine takes are one job of the writer.

use async_trait::async_trait;
use hookd_core::model::{Application, Delivery, DeliveryStatus, Endpoint, Message, Ordering};
use hookd_core::{AppId, EndpointId, Timestamp};
use rusqlite::{Connection, params};

use super::rows::{self, ENDPOINT_COLUMNS, fetch, fetch_one, run};
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
    conn: &Connection,
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
fn get_or_create_app(conn: &Connection, app: &Application) -> Result<AppId, StoreError> {
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
        F: Fn(&Connection, Option<&dyn Handoff>) -> Result<Written, StoreError> + Send + 'static,
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
fn event_id_spent(conn: &Connection, app: &AppId, event_id: &str) -> Result<bool, StoreError> {
    let spent = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM spent_event_ids WHERE app_id = ?1 AND event_id = ?2)",
        )?
        .query_row(params![app.as_str(), event_id], |row| row.get(0))?;
    Ok(spent)
}

/// Writes `message` and its deliveries. Those `handoff` takes are written claimed (`sending`
/// until their lease ends) and returned, to hand off once committed; the rest are due at once.
pub(super) fn insert_message(
    conn: &Connection,
    message: &Message,
    route: &Route,
    handoff: Option<&dyn Handoff>,
) -> Result<Written, StoreError> {
    if let Some(event_id) = &message.event_id
        && event_id_spent(conn, &message.app_id, event_id)?
    {
        return Err(StoreError::Conflict(taken::event_id(Some(event_id))));
    }
    let inserted = run(conn, &sql::insert(message));
    inserted.map_err(refused(
        taken::event_id(message.event_id.as_deref()),
        "application",
    ))?;
    // A delivery to one named endpoint (a test send) keeps the message's own key, whatever the
    // endpoint's ordering.
    let routed = match route {
        Route::Subscribers => subscribers(conn, message)?,
        Route::Only(endpoint) => vec![(endpoint.clone(), Ordering::PerKey)],
    };
    let mut insert = conn.prepare_cached(INSERT_DELIVERY)?;
    let mut handed = Vec::new();
    let mut waiting = 0;
    for (endpoint, ordering) in &routed {
        let ordering_key = ordering.key_of(message.ordering_key.as_deref());
        if let Some(key) = &ordering_key
            && key_is_busy(conn, endpoint, key)?
        {
            insert
                .execute(params![
                    message.id.as_str(),
                    endpoint.as_str(),
                    DeliveryStatus::Pending.code(),
                    None::<i64>,
                    message.created_at.as_millis(),
                    key,
                ])
                .map_err(missing("endpoint"))?;
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
        insert
            .execute(params![
                message.id.as_str(),
                endpoint.as_str(),
                delivery.status.code(),
                delivery.next_attempt_at.map(Timestamp::as_millis),
                delivery.updated_at.as_millis(),
                delivery.ordering_key,
            ])
            .map_err(missing("endpoint"))?;
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

/// The endpoint and the room `handoff` holds for a new delivery to it, if it takes one. Only an
/// enabled endpoint's deliveries go out: a test send may name a disabled one, which then waits.
fn taken(
    conn: &Connection,
    handoff: &dyn Handoff,
    endpoint: &EndpointId,
) -> Result<Option<(Endpoint, Reserved)>, StoreError> {
    let Some(reserved) = handoff.reserve(endpoint) else {
        return Ok(None);
    };
    const ENABLED_ENDPOINT: Sql = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        " FROM endpoints e WHERE e.id = ?1 AND NOT e.disabled"
    );
    let enabled = fetch_one(
        conn,
        &Statement::new(ENABLED_ENDPOINT, args![endpoint.as_str()]),
        rows::endpoint,
    )?;
    Ok(enabled.map(|endpoint| (endpoint, reserved)))
}

/// Writes operational-webhook messages, each with its deliveries, inside the caller's write.
pub(super) fn insert_events(conn: &Connection, events: &[Message]) -> Result<(), StoreError> {
    for event in events {
        insert_message(conn, event, &Route::Subscribers, None)?;
    }
    Ok(())
}

/// Whether `endpoint` has an unsettled delivery ordered under `key`: one queued, or waiting.
fn key_is_busy(conn: &Connection, endpoint: &EndpointId, key: &str) -> Result<bool, StoreError> {
    let busy = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = ?1 AND ordering_key = ?2
                            AND next_attempt_at IS NOT NULL)
                 OR EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = ?1 AND ordering_key = ?2
                            AND next_attempt_at IS NULL AND status = ?3)",
        )?
        .query_row(
            params![endpoint.as_str(), key, DeliveryStatus::Pending.code()],
            |row| row.get(0),
        )?;
    Ok(busy)
}

/// The enabled endpoints of the message's application whose filters take it, with their
/// ordering.
fn subscribers(
    conn: &Connection,
    message: &Message,
) -> Result<Vec<(EndpointId, Ordering)>, StoreError> {
    let subscribers = fetch(
        conn,
        &sql::subscribers(&message.app_id),
        Subscriber::from_row,
    )?;
    Ok(subscribers
        .into_iter()
        .filter(|s| s.takes(message))
        .map(|s| (EndpointId::from_stored(s.id), s.ordering))
        .collect())
}
