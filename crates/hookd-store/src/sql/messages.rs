//! [`MessageStore`] on both databases: its reads are shared statements; publishing is each
//! backend's own ([`Publish`]). Also the routing read both publishes share.

use std::collections::HashMap;

use async_trait::async_trait;
use hookd_core::model::filters_take;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, Message, Ordering};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};

use super::rows::{self, Columns, Decoded, ENDPOINT_WIDTH, MESSAGE_WIDTH, int, text};
use super::{Database, Dialect, ListQuery, Statement, args, health, search, sql};
use crate::columns::{
    ATTEMPT_COLUMNS, DELIVERED, DELIVERY_COLUMNS, ENDPOINT_COLUMNS, MESSAGE_COLUMNS,
};
use crate::json::{decode_opt, encode_opt};
use crate::store::tally;
use crate::{
    AttemptFilter, CreatedMessage, DeliveryTally, EndpointStats, HealthBucket, HealthWindow,
    MessageFilter, MessageStore, NewMessage, OldestPending, Page, PageRequest, StoreError,
};

/// What [`MessageStore`] asks of each backend itself: publishing. SQLite writes a publish as
/// one job of its writer and hands the new deliveries to its engine; PostgreSQL writes
/// concurrent publishes in one transaction.
#[async_trait]
pub trait Publish: Database {
    /// [`MessageStore::publish`].
    async fn publish_message(&self, new: NewMessage) -> Result<CreatedMessage, StoreError>;
}

#[async_trait]
impl<D: Publish> MessageStore for D {
    async fn publish(&self, new: NewMessage) -> Result<CreatedMessage, StoreError> {
        self.publish_message(new).await
    }

    async fn get_message(
        &self,
        app: &AppId,
        id_or_event_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        self.read_one(get(app, id_or_event_id), rows::message).await
    }

    async fn list_messages(
        &self,
        app: &AppId,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Message>, StoreError> {
        let query = list(D::DIALECT, app, filter).page("m.id", true, page);
        self.read_page(query, rows::message).await
    }

    async fn delivery_tallies(
        &self,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, DeliveryTally>, StoreError> {
        let counts = self.read(delivery_tallies(D::DIALECT, messages), tally_row);
        Ok(tally(counts.await?))
    }

    async fn list_message_deliveries(
        &self,
        app: &AppId,
        message: &Message,
    ) -> Result<Vec<(Endpoint, Delivery)>, StoreError> {
        self.read(deliveries_of(app, &message.id), |row| {
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
        page: &PageRequest,
    ) -> Result<Page<(Message, Delivery)>, StoreError> {
        let query = endpoint_deliveries(D::DIALECT, &endpoint.id, filter);
        let query = query.page("d.message_id", true, page);
        self.read_page(query, |row| {
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
        let query = message_attempts(D::DIALECT, app, &message.id, filter);
        self.read_page(query.page("a.id", true, page), rows::attempt)
            .await
    }

    async fn list_attempts_by_endpoint(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let query = endpoint_attempts(D::DIALECT, &endpoint.id, filter);
        self.read_page(query.page("a.id", true, page), rows::attempt)
            .await
    }

    async fn endpoint_stats(
        &self,
        endpoint: &Endpoint,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<EndpointStats, StoreError> {
        let [messages, attempts] = search::stats_ranges(since, until);
        let deliveries = delivery_counts(&endpoint.id, &messages);
        let deliveries = self.read(deliveries, count_row).await?;
        let attempts = self.read(attempt_counts(&endpoint.id, &attempts), count_row);
        Ok(search::stats_from(&deliveries, &attempts.await?))
    }

    async fn endpoint_history(
        &self,
        endpoint: &Endpoint,
        window: &HealthWindow,
    ) -> Result<Vec<HealthBucket>, StoreError> {
        let [messages, attempts] = search::stats_ranges(window.since, window.until());
        let attempts = health::attempts(&endpoint.id, window, &attempts);
        let attempts = self.read(attempts, health::attempt_row).await?;
        let waiting = health::waiting(&endpoint.id, window, &messages);
        let waiting = self.read(waiting, health::waiting_row).await?;
        Ok(health::buckets(window, &attempts, &waiting))
    }

    async fn oldest_pending(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<OldestPending>, StoreError> {
        let mut oldest: Option<OldestPending> = None;
        for status in health::WAITING {
            let statement = health::oldest(&endpoint.id, status);
            let found = self.read_one(statement, health::oldest_row).await?;
            oldest = match (oldest, found) {
                (Some(a), Some(b)) => Some(if b.message_id < a.message_id { b } else { a }),
                (a, b) => a.or(b),
            };
        }
        Ok(oldest)
    }

    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError> {
        self.read_one(get_attempt(&message.id, attempt_id), rows::attempt)
            .await
    }
}

pub fn insert(message: &Message) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at,
         ordering_key, tags, deliver_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    );
    Statement::new(
        sql,
        args![
            message.id.as_str(),
            message.app_id.as_str(),
            message.event_type.as_str(),
            message.event_id.as_deref(),
            encode_opt(message.channels.as_ref()),
            message.payload.as_deref(),
            message.created_at,
            message.ordering_key.as_deref(),
            encode_opt(message.tags.as_ref()),
            message.deliver_at,
        ],
    )
}

/// Keeps the message's content until `at` instead of the server's window.
pub fn set_expiry(message: &MessageId, at: Timestamp) -> Statement<'_> {
    let sql = sql!("UPDATE messages SET payload_expires_at = ?2 WHERE id = ?1");
    Statement::new(sql, args![message.as_str(), at])
}

/// Makes every delivery of a scheduled message due when it asked to go out.
pub fn schedule(message: &MessageId, deliver_at: Timestamp) -> Statement<'_> {
    let sql = sql!("UPDATE deliveries SET next_attempt_at = ?2 WHERE message_id = ?1");
    Statement::new(sql, args![message.as_str(), deliver_at])
}

/// The message of `app` whose id or `eventId` is `id_or_event_id`; should one message's
/// `eventId` equal another's id, the id wins.
fn get<'a>(app: &'a AppId, id_or_event_id: &'a str) -> Statement<'a> {
    let sql = sql!(
        "SELECT ",
        MESSAGE_COLUMNS,
        " FROM messages m WHERE m.app_id = ?1 AND (m.id = ?2 OR m.event_id = ?2)
         ORDER BY m.id = ?2 DESC LIMIT 1"
    );
    Statement::new(sql, args![app.as_str(), id_or_event_id])
}

/// An application's messages, filtered; page them on `m.id`, newest first.
pub(super) fn list<'a>(
    dialect: Dialect,
    app: &'a AppId,
    filter: &'a MessageFilter,
) -> ListQuery<'a> {
    let select = sql!(
        "SELECT ",
        MESSAGE_COLUMNS,
        " FROM messages m WHERE m.app_id = ?1"
    );
    let mut query = ListQuery::new(dialect, select, args![app.as_str()]);
    if let Some(types) = &filter.event_types {
        query.and(&dialect.is_one_of("m.event_type"), types.clone());
    }
    // Both are JSON lists of strings, or NULL (which matches nothing).
    for (column, wanted) in [("m.channels", &filter.channel), ("m.tags", &filter.tag)] {
        if let Some(wanted) = wanted {
            query.and(&dialect.list_holds(column), wanted.as_str());
        }
    }
    let (below, from) = search::message_id_bounds(filter.before, filter.after);
    if let Some(below) = below {
        query.and("m.id < ?", below);
    }
    if let Some(from) = from {
        query.and("m.id >= ?", from);
    }
    query.and_time("m.created_at < ?", filter.before);
    query.and_time("m.created_at > ?", filter.after);
    if let Some(status) = filter.status {
        query.and(&search::delivery_status_condition(status), app.as_str());
    }
    query
}

/// The deliveries of `messages` counted by message and status: [`tally_row`].
fn delivery_tallies(dialect: Dialect, messages: &[MessageId]) -> Statement<'static> {
    let sql = match dialect {
        Dialect::Sqlite => sql!(
            "SELECT message_id, status, COUNT(*) FROM deliveries
             WHERE message_id IN (SELECT value FROM json_each(?1)) GROUP BY message_id, status"
        )
        .only(Dialect::Sqlite),
        Dialect::Postgres => sql!(
            "SELECT message_id, status, COUNT(*) FROM deliveries
             WHERE message_id = ANY(?1) GROUP BY message_id, status"
        )
        .only(Dialect::Postgres),
    };
    let ids: Vec<String> = messages.iter().map(ToString::to_string).collect();
    Statement::new(sql, args![ids])
}

/// A row of [`delivery_tallies`].
fn tally_row(row: &dyn Columns) -> Decoded<(MessageId, hookd_core::model::DeliveryStatus, u32)> {
    Ok((
        MessageId::from_stored(text(row, 0)?),
        hookd_core::model::DeliveryStatus::from_code(int(row, 1)?),
        int::<i64, _>(row, 2)?.try_into().unwrap_or(u32::MAX),
    ))
}

/// A message's deliveries to endpoints of `app`, each with its endpoint (endpoint columns
/// first), in endpoint order.
fn deliveries_of<'a>(app: &'a AppId, message: &'a MessageId) -> Statement<'a> {
    let sql = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        ", ",
        DELIVERY_COLUMNS,
        " FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
         WHERE d.message_id = ?1 AND e.app_id = ?2 ORDER BY e.id"
    );
    Statement::new(sql, args![message.as_str(), app.as_str()])
}

/// An endpoint's deliveries, each with its message (message columns first), filtered; page
/// them on `d.message_id`, newest first.
pub(crate) fn endpoint_deliveries<'a>(
    dialect: Dialect,
    endpoint: &'a EndpointId,
    filter: &AttemptFilter,
) -> ListQuery<'a> {
    let select = sql!(
        "SELECT ",
        MESSAGE_COLUMNS,
        ", ",
        DELIVERY_COLUMNS,
        " FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE d.endpoint_id = ?1"
    );
    let query = ListQuery::new(dialect, select, args![endpoint.as_str()]);
    let mut query = filtered(query, filter, "d.status", "m.created_at");
    if filter.status.is_some_and(|s| s != DeliveryStatus::Success) {
        query.and_plain(search::NOT_DELIVERED);
    }
    query
}

/// The first page of `endpoint`'s deliveries in `status`, as the API asks for it: what the plan
/// tests check.
#[cfg(test)]
pub(crate) fn endpoint_first_page<'a>(
    dialect: Dialect,
    endpoint: &'a EndpointId,
    status: DeliveryStatus,
) -> super::list::PageQuery<'a> {
    let filter = AttemptFilter {
        status: Some(status),
        ..Default::default()
    };
    let page = PageRequest {
        limit: 50,
        cursor: None,
    };
    endpoint_deliveries(dialect, endpoint, &filter).page("d.message_id", true, &page)
}

/// A message's attempts, filtered; page them on `a.id`, newest first.
fn message_attempts<'a>(
    dialect: Dialect,
    app: &'a AppId,
    message: &'a MessageId,
    filter: &AttemptFilter,
) -> ListQuery<'a> {
    let select = sql!(
        "SELECT ",
        ATTEMPT_COLUMNS,
        " FROM attempts a JOIN messages m ON m.id = a.message_id
         WHERE a.message_id = ?1 AND m.app_id = ?2"
    );
    let query = ListQuery::new(dialect, select, args![message.as_str(), app.as_str()]);
    filtered(query, filter, "a.status", "a.created_at")
}

/// An endpoint's attempts, filtered; page them on `a.id`, newest first.
fn endpoint_attempts<'a>(
    dialect: Dialect,
    endpoint: &'a EndpointId,
    filter: &AttemptFilter,
) -> ListQuery<'a> {
    let select = sql!(
        "SELECT ",
        ATTEMPT_COLUMNS,
        " FROM attempts a WHERE a.endpoint_id = ?1"
    );
    let query = ListQuery::new(dialect, select, args![endpoint.as_str()]);
    filtered(query, filter, "a.status", "a.created_at")
}

/// Adds `filter`'s conditions on the `status` and `created` columns to `query`.
fn filtered<'a>(
    mut query: ListQuery<'a>,
    filter: &AttemptFilter,
    status: &str,
    created: &str,
) -> ListQuery<'a> {
    if let Some(wanted) = filter.status {
        query.and(&format!("{status} = ?"), wanted.code());
    }
    query.and_time(&format!("{created} < ?"), filter.before);
    query.and_time(&format!("{created} > ?"), filter.after);
    query
}

/// Deliveries of one endpoint by status for messages in an id range: `status, count` rows.
fn delivery_counts<'a>(
    endpoint: &'a EndpointId,
    (from, below): &'a (String, String),
) -> Statement<'a> {
    let sql = sql!(
        "SELECT status, COUNT(*) FROM deliveries WHERE endpoint_id = ?1 AND message_id >= ?2
         AND message_id < ?3 GROUP BY status"
    );
    Statement::new(sql, args![endpoint.as_str(), from, below])
}

/// Attempts to one endpoint by status in an id range: `status, count` rows.
fn attempt_counts<'a>(
    endpoint: &'a EndpointId,
    (from, below): &'a (String, String),
) -> Statement<'a> {
    let sql = sql!(
        "SELECT status, COUNT(*) FROM attempts WHERE endpoint_id = ?1 AND id >= ?2
         AND id < ?3 GROUP BY status"
    );
    Statement::new(sql, args![endpoint.as_str(), from, below])
}

/// A `status, count` row of [`delivery_counts`] or [`attempt_counts`].
fn count_row(row: &dyn Columns) -> Decoded<(i64, i64)> {
    Ok((int(row, 0)?, int(row, 1)?))
}

fn get_attempt<'a>(message: &'a MessageId, attempt: &'a str) -> Statement<'a> {
    let sql = sql!(
        "SELECT ",
        ATTEMPT_COLUMNS,
        " FROM attempts a WHERE a.message_id = ?1 AND a.id = ?2"
    );
    Statement::new(sql, args![message.as_str(), attempt])
}

/// The enabled endpoints of `app` that get deliveries ([`DELIVERED`]), as routing reads them: [`Subscriber::from_row`]. Only the
/// routing columns: this runs for every publish.
pub fn subscribers(app: &AppId) -> Statement<'_> {
    let sql = sql!(
        "SELECT id, event_types, channels, strict_order FROM endpoints
         WHERE app_id = ?1 AND NOT disabled AND ",
        DELIVERED
    );
    Statement::new(sql, args![app.as_str()])
}

/// An enabled endpoint as routing sees it: its id, filters and ordering.
pub struct Subscriber {
    pub id: String,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    pub ordering: Ordering,
}

/// A subscriber's stored columns: id, event-type and channel filters, strict order.
pub type SubscriberRow = (String, Option<String>, Option<String>, bool);

impl Subscriber {
    /// The routing of a whole endpoint row.
    pub fn of(endpoint: &Endpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            event_types: endpoint.event_types.clone(),
            channels: endpoint.channels.clone(),
            ordering: endpoint.ordering,
        }
    }

    /// A row of [`subscribers`].
    pub fn from_row(row: &dyn Columns) -> Decoded<Self> {
        Self::decode((
            text(row, 0)?,
            row.opt_text(1)?,
            row.opt_text(2)?,
            row.bool(3)?,
        ))
    }

    /// Decodes the stored filters (JSON text, NULL for none) and ordering.
    pub fn decode(
        (id, event_types, channels, strict_order): SubscriberRow,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            id,
            event_types: decode_opt(event_types)?,
            channels: decode_opt(channels)?,
            ordering: crate::columns::ordering(strict_order),
        })
    }

    /// Whether its filters take `message`.
    pub fn takes(&self, message: &Message) -> bool {
        filters_take(
            self.event_types.as_deref(),
            self.channels.as_deref(),
            &message.event_type,
            message.channels.as_deref(),
        )
    }
}
