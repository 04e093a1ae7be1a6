//! [`MessageStore`] on PostgreSQL: messages and the delivery log.

use std::collections::HashMap;

use async_trait::async_trait;
use hookd_core::model::filters_take;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, Ordering,
};
use hookd_core::{AppId, MessageId, Timestamp};
use sqlx::AssertSqlSafe;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection, PgPool};
use sqlx::query::Query;

use super::rows;
use super::{ListQuery, Param, PgStore, applications, fetch_one_of, missing, refused, sql, text};
use crate::columns::{
    ATTEMPT_COLUMNS, DELIVERY_COLUMNS, ENDPOINT_COLUMNS, ENDPOINT_WIDTH, MESSAGE_COLUMNS,
    MESSAGE_WIDTH,
};
use crate::error::taken;
use crate::json::{decode_opt, encode_opt};
use crate::search;
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
        let created = insert_unhanded(&mut tx, message, payload_expires_at).await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn create_message_in_app(
        &self,
        app: &Application,
        message: &Message,
        payload_expires_at: Option<Timestamp>,
    ) -> Result<CreatedMessage, StoreError> {
        let mut tx = self.pool.begin().await?;
        let message = Message {
            app_id: applications::get_or_create(&mut tx, app).await?,
            ..message.clone()
        };
        let created = insert_unhanded(&mut tx, &message, payload_expires_at).await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn get_message(
        &self,
        app: &AppId,
        id_or_event_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        let query = sql(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.app_id = $1 AND (m.id = $2 OR m.event_id = $2)
             ORDER BY m.id = $2 DESC LIMIT 1"
        ))
        .bind(app.as_str())
        .bind(id_or_event_id);
        fetch_one_of(query, &self.pool, rows::message).await
    }

    async fn list_messages(
        &self,
        app: &AppId,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Message>, StoreError> {
        let select = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.app_id = $1");
        let mut query = ListQuery::new(&select, vec![text(app.as_str())]);
        if let Some(types) = &filter.event_types {
            query.and("m.event_type = ANY(?)", Param::Texts(types.clone()));
        }
        // Both are JSON text (a list of strings) or NULL, which matches nothing.
        for (column, wanted) in [("channels", &filter.channel), ("tags", &filter.tag)] {
            if let Some(wanted) = wanted {
                let has = format!("? = ANY(SELECT json_array_elements_text(m.{column}::json))");
                query.and(&has, text(wanted));
            }
        }
        let (below, from) = search::message_id_bounds(filter.before, filter.after);
        if let Some(below) = below {
            query.and("m.id < ?", Param::Text(below));
        }
        if let Some(from) = from {
            query.and("m.id >= ?", Param::Text(from));
        }
        query.and_time("m.created_at < ?", filter.before);
        query.and_time("m.created_at > ?", filter.after);
        if let Some(status) = filter.status {
            query.and(
                &search::delivery_status_condition(status),
                text(app.as_str()),
            );
        }
        query
            .page(&self.pool, "m.id", true, page, rows::message)
            .await
    }

    async fn delivery_tallies(
        &self,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, DeliveryTally>, StoreError> {
        let ids: Vec<&str> = messages.iter().map(MessageId::as_str).collect();
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT message_id, status, COUNT(*) FROM deliveries
             WHERE message_id = ANY($1) GROUP BY message_id, status",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(tally(rows.into_iter().map(|(id, status, count)| {
            (
                MessageId::from_stored(id),
                DeliveryStatus::from_code(status),
                u32::try_from(count).unwrap_or(u32::MAX),
            )
        })))
    }

    async fn list_message_deliveries(
        &self,
        app: &AppId,
        message: &Message,
    ) -> Result<Vec<(Endpoint, Delivery)>, StoreError> {
        let rows = sql(format!(
            "SELECT {ENDPOINT_COLUMNS}, {DELIVERY_COLUMNS} FROM deliveries d
             JOIN endpoints e ON e.id = d.endpoint_id
             WHERE d.message_id = $1 AND e.app_id = $2 ORDER BY e.id"
        ))
        .bind(message.id.as_str())
        .bind(app.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    rows::endpoint(row)?,
                    rows::delivery_at(row, ENDPOINT_WIDTH)?,
                ))
            })
            .collect()
    }

    async fn list_endpoint_deliveries(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<(Message, Delivery)>, StoreError> {
        let select = format!(
            "SELECT {MESSAGE_COLUMNS}, {DELIVERY_COLUMNS} FROM deliveries d
             JOIN messages m ON m.id = d.message_id WHERE d.endpoint_id = $1"
        );
        let mut query = ListQuery::new(&select, vec![text(endpoint.id.as_str())]);
        if let Some(status) = filter.status {
            query.and("d.status = ?", Param::Int(status.code().into()));
        }
        query.and_time("m.created_at < ?", filter.before);
        query.and_time("m.created_at > ?", filter.after);
        query
            .page(&self.pool, "d.message_id", true, page, |row| {
                Ok((rows::message(row)?, rows::delivery_at(row, MESSAGE_WIDTH)?))
            })
            .await
    }

    async fn list_attempts_by_message(
        &self,
        app: &AppId,
        message: &Message,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let select = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts a JOIN messages m ON m.id = a.message_id
             WHERE a.message_id = $1 AND m.app_id = $2"
        );
        let query = ListQuery::new(&select, vec![text(message.id.as_str()), text(app.as_str())]);
        attempt_page(&self.pool, query, filter, page).await
    }

    async fn list_attempts_by_endpoint(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let select = format!("SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.endpoint_id = $1");
        let query = ListQuery::new(&select, vec![text(endpoint.id.as_str())]);
        attempt_page(&self.pool, query, filter, page).await
    }

    async fn endpoint_stats(
        &self,
        endpoint: &Endpoint,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<EndpointStats, StoreError> {
        let [messages, attempts] = search::stats_ranges(since, until);
        let placeholders = ["$1", "$2", "$3"];
        let count = |sql: String, (from, below): (String, String)| {
            sqlx::query_as::<_, (i64, i64)>(AssertSqlSafe(sql))
                .bind(endpoint.id.as_str())
                .bind(from)
                .bind(below)
                .fetch_all(&self.pool)
        };
        let deliveries = count(search::delivery_counts_sql(placeholders), messages).await?;
        let attempts = count(search::attempt_counts_sql(placeholders), attempts).await?;
        Ok(search::stats_from(&deliveries, &attempts))
    }

    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError> {
        let query = sql(format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.message_id = $1 AND a.id = $2"
        ))
        .bind(message.id.as_str())
        .bind(attempt_id);
        fetch_one_of(query, &self.pool, rows::attempt).await
    }
}

/// Adds the attempt filters to `query` and runs it newest first.
async fn attempt_page(
    pool: &PgPool,
    mut query: ListQuery,
    filter: &AttemptFilter,
    page: &PageRequest,
) -> Result<Page<Attempt>, StoreError> {
    if let Some(status) = filter.status {
        query.and("a.status = ?", Param::Int(status.code().into()));
    }
    query.and_time("a.created_at < ?", filter.before);
    query.and_time("a.created_at > ?", filter.after);
    query.page(pool, "a.id", true, page, rows::attempt).await
}

/// Keeps the message's content until `at` instead of the server's window.
pub(super) async fn set_expiry(
    conn: &mut PgConnection,
    message: &MessageId,
    at: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE messages SET payload_expires_at = $2 WHERE id = $1")
        .bind(message.as_str())
        .bind(at.as_millis())
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes `message` and its deliveries on `conn` (inside the caller's transaction), none
/// handed to the engine: due at its `deliver_at` when it has one (they wait in the database
/// until then), else at once; its content kept until `payload_expires_at` when given.
async fn insert_unhanded(
    conn: &mut PgConnection,
    message: &Message,
    payload_expires_at: Option<Timestamp>,
) -> Result<CreatedMessage, StoreError> {
    let created = insert_message(conn, message, &Route::Subscribers).await?;
    if let Some(at) = payload_expires_at {
        set_expiry(conn, &message.id, at).await?;
    }
    if let Some(due) = message.deliver_at {
        sqlx::query("UPDATE deliveries SET next_attempt_at = $2 WHERE message_id = $1")
            .bind(message.id.as_str())
            .bind(due.as_millis())
            .execute(&mut *conn)
            .await?;
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
    sqlx::query(
        "INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at,
         ordering_key, tags, deliver_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(message.id.as_str())
    .bind(message.app_id.as_str())
    .bind(&message.event_type)
    .bind(message.event_id.as_deref())
    .bind(encode_opt(message.channels.as_ref()))
    .bind(message.payload.as_deref())
    .bind(message.created_at.as_millis())
    .bind(message.ordering_key.as_deref())
    .bind(encode_opt(message.tags.as_ref()))
    .bind(message.deliver_at.map(Timestamp::as_millis))
    .execute(&mut *conn)
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

/// An enabled endpoint as routing sees it: its id, filters and ordering, the only columns
/// read, since routing runs for every publish.
pub(super) struct Subscriber {
    id: String,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    ordering: Ordering,
}

impl Subscriber {
    /// The routing of a whole endpoint row.
    pub(super) fn of(endpoint: &Endpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            event_types: endpoint.event_types.clone(),
            channels: endpoint.channels.clone(),
            ordering: endpoint.ordering,
        }
    }

    /// Decodes the stored filters (JSON text, NULL for none) and ordering.
    pub(super) fn decode(
        (id, event_types, channels, strict_order): SubscriberRow,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            id,
            event_types: decode_opt(event_types)?,
            channels: decode_opt(channels)?,
            ordering: crate::columns::ordering(strict_order),
        })
    }

    fn takes(&self, message: &Message) -> bool {
        filters_take(
            self.event_types.as_deref(),
            self.channels.as_deref(),
            &message.event_type,
            message.channels.as_deref(),
        )
    }
}

/// The enabled endpoints of `app`.
async fn subscribers(conn: &mut PgConnection, app: &AppId) -> Result<Vec<Subscriber>, StoreError> {
    let rows = sqlx::query_as::<_, SubscriberRow>(
        "SELECT id, event_types, channels, strict_order FROM endpoints
         WHERE app_id = $1 AND NOT disabled",
    )
    .bind(app.as_str())
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter().map(Subscriber::decode).collect()
}

/// A subscriber's stored columns: id, event-type and channel filters, strict order.
pub(super) type SubscriberRow = (String, Option<String>, Option<String>, bool);

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
