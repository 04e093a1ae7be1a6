//! [`MessageStore`] on PostgreSQL: messages and the delivery log.

use std::collections::HashMap;

use async_trait::async_trait;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::{AppId, MessageId, Timestamp};
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection};
use sqlx::query::Query;

use super::rows::{self, ENDPOINT_WIDTH, MESSAGE_WIDTH, fetch, fetch_one, page, run};
use super::{PgStore, missing, refused};
use crate::error::taken;
use crate::search;
use crate::sql::Dialect;
use crate::sql::messages as sql;
pub(super) use crate::sql::messages::Subscriber;
use crate::store::tally;
use crate::{
    AttemptFilter, CreatedMessage, DeliveryTally, EndpointStats, MessageFilter, MessageStore, Page,
    PageRequest, Route, StoreError,
};

#[async_trait]
impl MessageStore for PgStore {
    async fn create_routed_message(
        &self,
        message: &Message,
        route: &Route,
    ) -> Result<CreatedMessage, StoreError> {
        self.publisher.publish(message, route).await
    }

    async fn create_scheduled_message(
        &self,
        message: &Message,
        deliver_at: Timestamp,
        payload_expires_at: Option<Timestamp>,
    ) -> Result<CreatedMessage, StoreError> {
        let message = &Message {
            deliver_at: Some(deliver_at),
            ..message.clone()
        };
        let mut tx = self.pool.begin().await?;
        let created = insert_message(&mut tx, message, &Route::Subscribers).await?;
        if let Some(at) = payload_expires_at {
            set_expiry(&mut tx, &message.id, at).await?;
        }
        run(&mut *tx, sql::schedule(&message.id, deliver_at)).await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn get_message(
        &self,
        app: &AppId,
        id_or_event_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        fetch_one(&self.pool, sql::get(app, id_or_event_id), rows::message).await
    }

    async fn list_messages(
        &self,
        app: &AppId,
        filter: &MessageFilter,
        page_of: &PageRequest,
    ) -> Result<Page<Message>, StoreError> {
        let query = sql::list(Dialect::Postgres, app, filter).page("m.id", true, page_of);
        page(&self.pool, query, rows::message).await
    }

    async fn delivery_tallies(
        &self,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, DeliveryTally>, StoreError> {
        let statement = sql::delivery_tallies(Dialect::Postgres, messages);
        Ok(tally(fetch(&self.pool, statement, sql::tally_row).await?))
    }

    async fn list_message_deliveries(
        &self,
        app: &AppId,
        message: &Message,
    ) -> Result<Vec<(Endpoint, Delivery)>, StoreError> {
        fetch(&self.pool, sql::deliveries_of(app, &message.id), |row| {
            Ok((
                rows::endpoint(row)?,
                rows::delivery_at(row, ENDPOINT_WIDTH)?,
            ))
        })
        .await
    }

    async fn list_endpoint_deliveries(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page_of: &PageRequest,
    ) -> Result<Page<(Message, Delivery)>, StoreError> {
        let query = sql::endpoint_deliveries(Dialect::Postgres, &endpoint.id, filter);
        page(
            &self.pool,
            query.page("d.message_id", true, page_of),
            |row| Ok((rows::message(row)?, rows::delivery_at(row, MESSAGE_WIDTH)?)),
        )
        .await
    }

    async fn list_attempts_by_message(
        &self,
        app: &AppId,
        message: &Message,
        filter: &AttemptFilter,
        page_of: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let query = sql::message_attempts(Dialect::Postgres, app, &message.id, filter);
        page(&self.pool, query.page("a.id", true, page_of), rows::attempt).await
    }

    async fn list_attempts_by_endpoint(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page_of: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let query = sql::endpoint_attempts(Dialect::Postgres, &endpoint.id, filter);
        page(&self.pool, query.page("a.id", true, page_of), rows::attempt).await
    }

    async fn endpoint_stats(
        &self,
        endpoint: &Endpoint,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<EndpointStats, StoreError> {
        let [messages, attempts] = search::stats_ranges(since, until);
        let deliveries = sql::delivery_counts(&endpoint.id, &messages);
        let deliveries = fetch(&self.pool, deliveries, sql::count_row).await?;
        let attempts = sql::attempt_counts(&endpoint.id, &attempts);
        let attempts = fetch(&self.pool, attempts, sql::count_row).await?;
        Ok(search::stats_from(&deliveries, &attempts))
    }

    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError> {
        let statement = sql::get_attempt(&message.id, attempt_id);
        fetch_one(&self.pool, statement, rows::attempt).await
    }
}

/// Keeps the message's content until `at` instead of the server's window.
pub(super) async fn set_expiry(
    conn: &mut PgConnection,
    message: &MessageId,
    at: Timestamp,
) -> Result<(), StoreError> {
    run(conn, sql::set_expiry(message, at)).await?;
    Ok(())
}

/// Writes a message and its deliveries on `conn` (inside the caller's transaction, which
/// decides whether they are kept).
pub(super) async fn insert_message(
    conn: &mut PgConnection,
    message: &Message,
    route: &Route,
) -> Result<CreatedMessage, StoreError> {
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
