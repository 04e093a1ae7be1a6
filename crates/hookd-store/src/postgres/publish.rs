//! Publishing on PostgreSQL (`crate::sql::messages::Publish`), and the routing and delivery
//! inserts the publish task (`publisher`) shares: a message written inside a caller's
//! transaction (a scheduled message, operational events) has all its deliveries inserted in
//! one statement from arrays.

use async_trait::async_trait;
use hookd_core::model::{Application, DeliveryStatus, Message};
use hookd_core::{AppId, Timestamp};
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection};
use sqlx::query::Query;

use super::rows::{fetch, fetch_one, run};
use super::{PgStore, missing, refused};
use crate::error::taken;
use crate::sql::applications;
pub(super) use crate::sql::messages::Subscriber;
use crate::sql::messages::{self as sql, Publish};
use crate::{CreatedMessage, NewMessage, Route, StoreError};

#[async_trait]
impl Publish for PgStore {
    async fn publish_message(&self, new: NewMessage) -> Result<CreatedMessage, StoreError> {
        // The publish task batches the common case; the rest is a transaction of its own.
        if new.handed_at_once() && new.payload_expires_at.is_none() {
            return self.publisher.publish(new.message, new.route).await;
        }
        let mut tx = self.pool.begin().await?;
        let created = insert_new(&mut tx, new).await?;
        tx.commit().await?;
        Ok(created)
    }
}

/// The id of the application whose uid is `app`'s, made from `app` in the caller's transaction
/// when there is none (`app` itself when it has no uid). A transaction making the same uid
/// meanwhile is waited for: committed, its application is the one found.
async fn get_or_create_app(
    conn: &mut PgConnection,
    app: &Application,
) -> Result<AppId, StoreError> {
    run(&mut *conn, applications::insert_unless_uid_taken(app)).await?;
    fetch_one(
        &mut *conn,
        applications::id_of_uid(app),
        applications::app_id,
    )
    .await?
    .ok_or(StoreError::NotFound("application"))
}

/// Writes `new` on `conn` (inside the caller's transaction), none of its deliveries handed to
/// the engine.
async fn insert_new(
    conn: &mut PgConnection,
    new: NewMessage,
) -> Result<CreatedMessage, StoreError> {
    let mut message = new.message;
    if let Some(app) = &new.app {
        message.app_id = get_or_create_app(conn, app).await?;
    }
    let created = insert_message(conn, &message, &new.route).await?;
    if let Some(at) = new.payload_expires_at {
        run(&mut *conn, sql::set_expiry(&message.id, at)).await?;
    }
    if let Some(due) = message.deliver_at {
        run(&mut *conn, sql::schedule(&message.id, due)).await?;
    }
    Ok(created)
}

/// Writes a message and its deliveries on `conn` (inside the caller's transaction, which
/// decides whether they are kept).
pub(super) async fn insert_message(
    conn: &mut PgConnection,
    message: &Message,
    route: &Route,
) -> Result<CreatedMessage, StoreError> {
    lock_parents(&mut *conn, &[message.app_id.as_str()], &[], &[])
        .await
        .map_err(missing("application"))?;
    run(&mut *conn, sql::insert(message))
        .await
        .map_err(refused(
            taken::event_id(message.event_id.as_deref()),
            "application",
        ))?;
    let subscribers = match route {
        Route::Subscribers => subscribers(conn, &message.app_id).await?,
        Route::Only(_) => Vec::new(),
    };
    let routed = routed(message, route, &subscribers);
    let count = routed.len();
    let mut deliveries = Deliveries::default();
    deliveries.add(message, routed);
    deliveries.insert(conn).await.map_err(missing("endpoint"))?;
    Ok(CreatedMessage {
        message: message.clone(),
        deliveries: count,
        queued: count,
    })
}

/// The enabled endpoints of `app`.
async fn subscribers(conn: &mut PgConnection, app: &AppId) -> Result<Vec<Subscriber>, StoreError> {
    fetch(conn, sql::subscribers(app), Subscriber::from_row).await
}

/// One delivery routing decided: its endpoint, and the key it is ordered under, if any.
pub(super) struct Routed<'a> {
    pub(super) endpoint: &'a str,
    pub(super) ordering_key: Option<String>,
}

/// The deliveries `route` makes of `message`; `subscribers` are the enabled endpoints of its
/// application (needed for [`Route::Subscribers`] only). A delivery to one named endpoint (a
/// test send) keeps the message's own key, whatever the endpoint's ordering.
pub(super) fn routed<'a>(
    message: &Message,
    route: &'a Route,
    subscribers: &'a [Subscriber],
) -> Vec<Routed<'a>> {
    match route {
        Route::Subscribers => subscribers
            .iter()
            .filter(|s| s.takes(message))
            .map(|s| Routed {
                endpoint: s.id.as_str(),
                ordering_key: s.ordering.key_of(message.ordering_key.as_deref()),
            })
            .collect(),
        Route::Only(endpoint) => vec![Routed {
            endpoint: endpoint.as_str(),
            ordering_key: message.ordering_key.clone(),
        }],
    }
}

/// New pending deliveries, each due when its message was created, written in one statement
/// however many there are.
#[derive(Default)]
pub(super) struct Deliveries<'a> {
    message_ids: Vec<&'a str>,
    endpoint_ids: Vec<&'a str>,
    due: Vec<i64>,
    ordering_keys: Vec<Option<String>>,
}

impl<'a> Deliveries<'a> {
    /// Adds the deliveries of `message` routing decided.
    pub(super) fn add(&mut self, message: &'a Message, routed: Vec<Routed<'a>>) {
        for delivery in routed {
            let (id, due) = (message.id.as_str(), message.created_at);
            self.push(id, delivery.endpoint, due, delivery.ordering_key);
        }
    }

    /// Adds one delivery of `message` to `endpoint`, due at `due` (a replay's: now).
    pub(super) fn push(
        &mut self,
        message: &'a str,
        endpoint: &'a str,
        due: Timestamp,
        ordering_key: Option<String>,
    ) {
        self.message_ids.push(message);
        self.endpoint_ids.push(endpoint);
        self.due.push(due.as_millis());
        self.ordering_keys.push(ordering_key);
    }

    /// Inserts the deliveries added (no statement when there are none).
    pub(super) async fn insert(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        if self.message_ids.is_empty() {
            return Ok(());
        }
        lock_parents(&mut *conn, &[], &self.message_ids, &self.endpoint_ids).await?;
        self.bind(sqlx::query(INSERT_DELIVERIES))
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Binds what [`INSERT_DELIVERIES`] reads, as its `$1` to `$5`.
    pub(super) fn bind<'q>(
        &'q self,
        query: Query<'q, Postgres, PgArguments>,
    ) -> Query<'q, Postgres, PgArguments> {
        query
            .bind(i64::from(DeliveryStatus::Pending.code()))
            .bind(&self.message_ids)
            .bind(&self.endpoint_ids)
            .bind(&self.due)
            .bind(&self.ordering_keys)
    }
}

/// Inserts [`Deliveries`] (bound by [`Deliveries::bind`]) from arrays, pending and due when
/// their message was created (or waiting, when their key has an unsettled delivery); the rows
/// are named `routed`, and inserted in the order of their ordering locks' ids, the order
/// every writer takes them in (see `deliveries_in_order.sql`).
pub(super) const INSERT_DELIVERIES: &str = "INSERT INTO deliveries
     (message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at, ordering_key)
     SELECT message_id, endpoint_id, $1, 0, due, due, ordering_key
     FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::text[])
         AS routed(message_id, endpoint_id, due, ordering_key)
     ORDER BY ordering_lock(endpoint_id, ordering_key), endpoint_id, message_id";

/// Locks the parents of rows about to be written (the function `lock_parents`), each once and
/// until the transaction ends; a missing one fails as the foreign key it stands for did
/// (23503, named for that key).
pub(super) async fn lock_parents(
    conn: &mut PgConnection,
    apps: &[&str],
    messages: &[&str],
    endpoints: &[&str],
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT lock_parents($1, $2, $3)")
        .bind(apps)
        .bind(messages)
        .bind(endpoints)
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes operational-webhook messages, each with its deliveries, inside the caller's
/// transaction.
pub(super) async fn insert_events(
    conn: &mut PgConnection,
    events: &[Message],
) -> Result<(), StoreError> {
    for event in events {
        insert_message(conn, event, &Route::Subscribers).await?;
    }
    Ok(())
}
