//! [`MessageStore`] on SQLite: messages and the delivery log.

use std::collections::HashMap;
use std::sync::LazyLock;

use async_trait::async_trait;
use hookd_core::model::filters_take;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, Ordering,
};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};
use rusqlite::types::Value;
use rusqlite::{Connection, params};

use super::rows::{
    self, ATTEMPT_COLUMNS, DELIVERY_COLUMNS, ENDPOINT_COLUMNS, ENDPOINT_WIDTH, MESSAGE_COLUMNS,
    MESSAGE_WIDTH, collect,
};
use super::{ListQuery, SqliteStore, applications, missing, refused, text};
use crate::error::taken;
use crate::json::{decode_opt, encode, encode_opt};
use crate::search;
use crate::store::tally;
use crate::{
    AttemptFilter, ClaimedDelivery, CreatedMessage, DeliveryTally, EndpointStats, Handoff,
    MessageFilter, MessageStore, Page, PageRequest, Reserved, Route, StoreError,
};

#[async_trait]
impl MessageStore for SqliteStore {
    async fn create_routed_message(
        &self,
        message: &Message,
        route: &Route,
    ) -> Result<CreatedMessage, StoreError> {
        let (message, route) = (message.clone(), route.clone());
        self.publish(move |conn, handoff| insert_message(conn, &message, &route, handoff))
            .await
    }

    async fn create_scheduled_message(
        &self,
        message: &Message,
        deliver_at: Timestamp,
        payload_expires_at: Option<Timestamp>,
    ) -> Result<CreatedMessage, StoreError> {
        let message = Message {
            deliver_at: Some(deliver_at),
            ..message.clone()
        };
        self.publish(move |conn, _| insert_unhanded(conn, &message, payload_expires_at))
            .await
    }

    async fn create_message_in_app(
        &self,
        app: &Application,
        message: &Message,
        payload_expires_at: Option<Timestamp>,
    ) -> Result<CreatedMessage, StoreError> {
        let (app, message) = (app.clone(), message.clone());
        self.publish(move |conn, _| {
            let message = Message {
                app_id: applications::get_or_create(conn, &app)?,
                ..message.clone()
            };
            insert_unhanded(conn, &message, payload_expires_at)
        })
        .await
    }

    async fn get_message(
        &self,
        app: &AppId,
        id_or_event_id: &str,
    ) -> Result<Option<Message>, StoreError> {
        let (app, key) = (app.clone(), id_or_event_id.to_owned());
        self.db
            .read(move |conn| {
                let sql = format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.app_id = ?1 AND (m.id = ?2 OR m.event_id = ?2)
                     ORDER BY m.id = ?2 DESC LIMIT 1"
                );
                Ok(collect(conn, &sql, [app.as_str(), &key], rows::message)?.pop())
            })
            .await
    }

    async fn list_messages(
        &self,
        app: &AppId,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Message>, StoreError> {
        let (app, filter, page) = (app.clone(), filter.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select =
                    format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.app_id = ?1");
                let mut query = ListQuery::new(&select, vec![text(app.as_str())]);
                if let Some(types) = &filter.event_types {
                    query.and(
                        "m.event_type IN (SELECT value FROM json_each(?))",
                        text(&encode(types)),
                    );
                }
                // Both are JSON lists of strings, or NULL (which matches nothing).
                let lists = [("channels", &filter.channel), ("tags", &filter.tag)];
                for (column, wanted) in lists {
                    if let Some(wanted) = wanted {
                        let has =
                            format!("EXISTS (SELECT 1 FROM json_each(m.{column}) WHERE value = ?)");
                        query.and(&has, text(wanted));
                    }
                }
                let (below, from) = search::message_id_bounds(filter.before, filter.after);
                if let Some(below) = below {
                    query.and("m.id < ?", Value::Text(below));
                }
                if let Some(from) = from {
                    query.and("m.id >= ?", Value::Text(from));
                }
                query.and_time("m.created_at < ?", filter.before);
                query.and_time("m.created_at > ?", filter.after);
                if let Some(status) = filter.status {
                    query.and(
                        &search::delivery_status_condition(status),
                        text(app.as_str()),
                    );
                }
                query.page(conn, "m.id", true, &page, rows::message)
            })
            .await
    }

    async fn delivery_tallies(
        &self,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, DeliveryTally>, StoreError> {
        let ids: Vec<Value> = messages.iter().map(|id| text(id.as_str())).collect();
        self.db
            .read(move |conn| {
                let marks = vec!["?"; ids.len()].join(",");
                let sql = format!(
                    "SELECT message_id, status, COUNT(*) FROM deliveries
                     WHERE message_id IN ({marks}) GROUP BY message_id, status"
                );
                let counts = collect(conn, &sql, rusqlite::params_from_iter(ids), |row| {
                    Ok((
                        MessageId::from_stored(row.get(0)?),
                        DeliveryStatus::from_code(row.get(1)?),
                        row.get::<_, u32>(2)?,
                    ))
                })?;
                Ok(tally(counts))
            })
            .await
    }

    async fn list_message_deliveries(
        &self,
        app: &AppId,
        message: &Message,
    ) -> Result<Vec<(Endpoint, Delivery)>, StoreError> {
        let (app, message_id) = (app.clone(), message.id.clone());
        self.db
            .read(move |conn| {
                let sql = format!(
                    "SELECT {ENDPOINT_COLUMNS}, {DELIVERY_COLUMNS} FROM deliveries d
                     JOIN endpoints e ON e.id = d.endpoint_id
                     WHERE d.message_id = ?1 AND e.app_id = ?2 ORDER BY e.id"
                );
                collect(conn, &sql, [message_id.as_str(), app.as_str()], |row| {
                    Ok((
                        rows::endpoint(row)?,
                        rows::delivery_at(row, ENDPOINT_WIDTH)?,
                    ))
                })
            })
            .await
    }

    async fn list_endpoint_deliveries(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<(Message, Delivery)>, StoreError> {
        let (endpoint_id, filter, page) = (endpoint.id.clone(), filter.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select = format!(
                    "SELECT {MESSAGE_COLUMNS}, {DELIVERY_COLUMNS} FROM deliveries d
                     JOIN messages m ON m.id = d.message_id WHERE d.endpoint_id = ?1"
                );
                let mut query = ListQuery::new(&select, vec![text(endpoint_id.as_str())]);
                if let Some(status) = filter.status {
                    query.and("d.status = ?", Value::Integer(status.code().into()));
                }
                query.and_time("m.created_at < ?", filter.before);
                query.and_time("m.created_at > ?", filter.after);
                query.page(conn, "d.message_id", true, &page, |row| {
                    Ok((rows::message(row)?, rows::delivery_at(row, MESSAGE_WIDTH)?))
                })
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
        let (app, message_id) = (app.clone(), message.id.clone());
        let (filter, page) = (filter.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select = format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts a JOIN messages m ON m.id = a.message_id
                     WHERE a.message_id = ?1 AND m.app_id = ?2"
                );
                let query =
                    ListQuery::new(&select, vec![text(message_id.as_str()), text(app.as_str())]);
                attempt_page(conn, query, &filter, &page)
            })
            .await
    }

    async fn list_attempts_by_endpoint(
        &self,
        endpoint: &Endpoint,
        filter: &AttemptFilter,
        page: &PageRequest,
    ) -> Result<Page<Attempt>, StoreError> {
        let (endpoint_id, filter, page) = (endpoint.id.clone(), filter.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select =
                    format!("SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.endpoint_id = ?1");
                let query = ListQuery::new(&select, vec![text(endpoint_id.as_str())]);
                attempt_page(conn, query, &filter, &page)
            })
            .await
    }

    async fn endpoint_stats(
        &self,
        endpoint: &Endpoint,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<EndpointStats, StoreError> {
        let endpoint_id = endpoint.id.clone();
        self.db
            .read(move |conn| {
                let [messages, attempts] = search::stats_ranges(since, until);
                let count = |sql: &str, (from, below): &(String, String)| {
                    let mut stmt = conn.prepare_cached(sql)?;
                    let rows = stmt.query_map([endpoint_id.as_str(), from, below], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
                    })?;
                    rows.collect::<Result<Vec<_>, _>>()
                };
                let placeholders = ["?1", "?2", "?3"];
                let deliveries = count(&search::delivery_counts_sql(placeholders), &messages)?;
                let attempts = count(&search::attempt_counts_sql(placeholders), &attempts)?;
                Ok(search::stats_from(&deliveries, &attempts))
            })
            .await
    }

    async fn get_attempt(
        &self,
        message: &Message,
        attempt_id: &str,
    ) -> Result<Option<Attempt>, StoreError> {
        let (message_id, attempt_id) = (message.id.clone(), attempt_id.to_owned());
        self.db
            .read(move |conn| {
                let sql = format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.message_id = ?1 AND a.id = ?2"
                );
                Ok(collect(
                    conn,
                    &sql,
                    [message_id.as_str(), &attempt_id],
                    rows::attempt,
                )?
                .pop())
            })
            .await
    }
}

impl SqliteStore {
    /// Writes a message with `write`, offering its deliveries to the store's [`Handoff`], and
    /// hands over those it took once committed. Write and handover run in a task of their own:
    /// a caller that goes away meanwhile (a cancelled request) must not leave the deliveries
    /// it wrote claimed and idle until their lease ends.
    pub(super) async fn publish<F>(&self, write: F) -> Result<CreatedMessage, StoreError>
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

/// Writes `message` and its deliveries without offering them to the engine: due at its
/// `deliver_at` when it has one (they wait in the database until then), else at once; its
/// content kept until `payload_expires_at` when given.
fn insert_unhanded(
    conn: &Connection,
    message: &Message,
    payload_expires_at: Option<Timestamp>,
) -> Result<Written, StoreError> {
    let written = insert_message(conn, message, &Route::Subscribers, None)?;
    if let Some(at) = payload_expires_at {
        set_expiry(conn, &message.id, at)?;
    }
    if let Some(due) = message.deliver_at {
        conn.prepare_cached("UPDATE deliveries SET next_attempt_at = ?2 WHERE message_id = ?1")?
            .execute(params![message.id.as_str(), due.as_millis()])?;
    }
    Ok(written)
}

/// Writes `message` and its deliveries. Those `handoff` takes are written claimed (`sending`
/// until their lease ends) and returned, to hand over once committed; the rest are due at once.
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
    let inserted = conn
        .prepare_cached(
            "INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at,
             ordering_key, tags, deliver_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            message.id.as_str(),
            message.app_id.as_str(),
            message.event_type,
            message.event_id,
            encode_opt(message.channels.as_ref()),
            message.payload,
            message.created_at.as_millis(),
            message.ordering_key,
            encode_opt(message.tags.as_ref()),
            message.deliver_at.map(Timestamp::as_millis),
        ]);
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
    let mut insert = conn.prepare_cached(
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, next_attempt_at,
         updated_at, ordering_key) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
    )?;
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

/// Keeps the message's content until `at` instead of the server's window.
pub(super) fn set_expiry(
    conn: &Connection,
    message: &MessageId,
    at: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE messages SET payload_expires_at = ?2 WHERE id = ?1")?
        .execute(params![message.as_str(), at.as_millis()])?;
    Ok(())
}

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
    // Built once: this runs for every delivery handed over.
    static ENABLED_ENDPOINT: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = ?1 AND NOT e.disabled")
    });
    let enabled = collect(conn, &ENABLED_ENDPOINT, [endpoint.as_str()], rows::endpoint)?.pop();
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
/// ordering. Reads only the routing columns: this runs for every publish.
fn subscribers(
    conn: &Connection,
    message: &Message,
) -> Result<Vec<(EndpointId, Ordering)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, event_types, channels, strict_order FROM endpoints
         WHERE app_id = ?1 AND disabled = 0",
    )?;
    let mut rows = stmt.query([message.app_id.as_str()])?;
    let mut routed = Vec::new();
    while let Some(row) = rows.next()? {
        let event_types: Option<Vec<String>> = decode_opt(row.get(1)?)?;
        let channels: Option<Vec<String>> = decode_opt(row.get(2)?)?;
        let channels_of_message = message.channels.as_deref();
        if filters_take(
            event_types.as_deref(),
            channels.as_deref(),
            &message.event_type,
            channels_of_message,
        ) {
            let ordering = crate::columns::ordering(row.get(3)?);
            routed.push((EndpointId::from_stored(row.get(0)?), ordering));
        }
    }
    Ok(routed)
}

/// Adds the attempt filters to `query` and runs it newest first.
fn attempt_page(
    conn: &Connection,
    mut query: ListQuery,
    filter: &AttemptFilter,
    page: &PageRequest,
) -> Result<Page<Attempt>, StoreError> {
    if let Some(status) = filter.status {
        query.and("a.status = ?", Value::Integer(status.code().into()));
    }
    query.and_time("a.created_at < ?", filter.before);
    query.and_time("a.created_at > ?", filter.after);
    query.page(conn, "a.id", true, page, rows::attempt)
}
