//! The embedded SQLite [`Store`]: hookd's zero-setup default.
//!
//! Writes go through [`db::Db::write`] (one writer thread, group commit); reads through
//! [`db::Db::read`] (a reader pool). SQL is written for SQLite here and for PostgreSQL in
//! [`crate::postgres`]; the behavioural tests hold both to one contract.

mod db;
mod queue;
mod rows;

use std::path::Path;

use async_trait::async_trait;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message,
};
use hookd_core::{AppId, Timestamp};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, ffi, params, params_from_iter};

use crate::error::{taken, touched};
use crate::json::{encode, encode_opt};
use crate::keyset::Keyset;
use crate::{
    ApiToken, AttemptFilter, CreatedMessage, MessageFilter, Page, PageRequest, Store, StoreError,
    StoredResponse,
};
use db::Db;
use rows::{
    APP_COLUMNS, ATTEMPT_COLUMNS, DELIVERY_COLUMNS, ENDPOINT_COLUMNS, ENDPOINT_WIDTH,
    EVENT_TYPE_COLUMNS, MESSAGE_COLUMNS, MESSAGE_WIDTH, TOKEN_COLUMNS, collect,
};

/// hookd's state in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    db: Db,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let db = tokio::task::spawn_blocking(move || Db::open(&path))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))??;
        Ok(Self { db })
    }
}

/// The kinds of constraint violation the store tells apart.
enum Violation {
    /// A UNIQUE or PRIMARY KEY constraint: the key is taken.
    Taken,
    /// A FOREIGN KEY constraint: the parent row does not exist.
    MissingParent,
}

fn violation(error: &rusqlite::Error) -> Option<Violation> {
    match error.sqlite_error()?.extended_code {
        ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => Some(Violation::Taken),
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => Some(Violation::MissingParent),
        _ => None,
    }
}

/// Maps a taken unique key to a conflict described by `what`, and a missing parent row (a
/// FOREIGN KEY violation) to `parent` not found; any other failure is the database's.
fn refused(what: String, parent: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |error| match violation(&error) {
        Some(Violation::Taken) => StoreError::Conflict(what),
        Some(Violation::MissingParent) => StoreError::NotFound(parent),
        None => error.into(),
    }
}

/// Maps a taken unique key to a conflict described by `what` (for writes without parents).
fn conflict(what: String) -> impl FnOnce(rusqlite::Error) -> StoreError {
    refused(what, "referenced record")
}

/// Maps a missing parent row to `parent` not found (for writes without unique keys).
fn missing(parent: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |error| match violation(&error) {
        Some(Violation::MissingParent) => StoreError::NotFound(parent),
        _ => error.into(),
    }
}

/// A list query: `select … where <fixed conditions>` plus optional filters and a keyset page.
struct ListQuery {
    sql: String,
    params: Vec<Value>,
}

impl ListQuery {
    fn new(select: &str, params: Vec<Value>) -> Self {
        Self {
            sql: select.to_owned(),
            params,
        }
    }

    /// Adds ` AND <condition>` with `?` standing for `value`.
    fn and(&mut self, condition: &str, value: Value) {
        self.params.push(value);
        let placeholder = format!("?{}", self.params.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace('?', &placeholder));
    }

    fn and_time(&mut self, condition: &str, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.and(condition, Value::Integer(at.as_millis()));
        }
    }

    /// Finishes the query with a page on `column` and runs it.
    fn page<T>(
        mut self,
        conn: &Connection,
        column: &str,
        descending: bool,
        page: &PageRequest,
        decode: impl Fn(&rusqlite::Row<'_>) -> rows::Decoded<T>,
    ) -> Result<Page<T>, StoreError> {
        let keyset = Keyset::new(
            column,
            descending,
            page,
            &format!("?{}", self.params.len() + 1),
        );
        if let Some(key) = &keyset.key {
            self.params.push(Value::Text(key.clone()));
        }
        self.sql.push_str(&keyset.condition);
        self.sql.push_str(&keyset.order_limit);
        let rows = collect(conn, &self.sql, params_from_iter(self.params), decode)?;
        Ok(keyset.page(rows))
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.to_owned())
}

fn insert_message(conn: &Connection, message: &Message) -> Result<CreatedMessage, StoreError> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            message.id.as_str(),
            message.app_id.as_str(),
            message.event_type,
            message.event_id,
            encode_opt(message.channels.as_ref()),
            message.payload,
            message.created_at.as_millis(),
        ]);
    inserted.map_err(refused(
        taken::event_id(message.event_id.as_deref()),
        "application",
    ))?;
    let endpoints = collect(
        conn,
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = ?1 AND e.disabled = 0"
        ),
        [message.app_id.as_str()],
        rows::endpoint,
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at)
         VALUES (?1, ?2, ?3, 0, ?4, ?4)",
    )?;
    let mut deliveries = 0;
    for endpoint in endpoints
        .iter()
        .filter(|e| e.subscribes_to(&message.event_type, message.channels.as_deref()))
    {
        insert.execute(params![
            message.id.as_str(),
            endpoint.id.as_str(),
            DeliveryStatus::Pending.code(),
            message.created_at.as_millis(),
        ])?;
        deliveries += 1;
    }
    Ok(CreatedMessage {
        message: message.clone(),
        deliveries,
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO applications (id, uid, name, metadata, throttle_rate, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![
                    app.id.as_str(),
                    app.uid,
                    app.name,
                    encode(&app.metadata),
                    app.throttle_rate,
                    app.created_at.as_millis(),
                    app.updated_at.as_millis(),
                ])
                .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                Ok(())
            })
            .await
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        let key = id_or_uid.to_owned();
        self.db
            .read(move |conn| {
                let sql =
                    format!("SELECT {APP_COLUMNS} FROM applications WHERE id = ?1 OR uid = ?1");
                Ok(collect(conn, &sql, [key], rows::app)?.pop())
            })
            .await
    }

    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError> {
        let page = page.clone();
        self.db
            .read(move |conn| {
                let select = format!("SELECT {APP_COLUMNS} FROM applications WHERE 1 = 1");
                ListQuery::new(&select, vec![]).page(conn, "id", false, &page, rows::app)
            })
            .await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE applications SET uid = ?2, name = ?3, metadata = ?4, throttle_rate = ?5,
                         updated_at = ?6 WHERE id = ?1",
                    )?
                    .execute(params![
                        app.id.as_str(),
                        app.uid,
                        app.name,
                        encode(&app.metadata),
                        app.throttle_rate,
                        app.updated_at.as_millis(),
                    ])
                    .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                touched(rows as u64, "application")
            })
            .await
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        let id = id.clone();
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM applications WHERE id = ?1", [id.as_str()])?;
                touched(rows as u64, "application")
            })
            .await
    }

    async fn create_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let ep = endpoint.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO endpoints (id, app_id, uid, url, description, event_types, channels,
                     disabled, throttle_rate, metadata, headers, secret, created_at, updated_at,
                     disabled_reason, disabled_at, timeout_secs)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                )?
                .execute(params![
                    ep.id.as_str(),
                    ep.app_id.as_str(),
                    ep.uid,
                    ep.url,
                    ep.description,
                    encode_opt(ep.event_types.as_ref()),
                    encode_opt(ep.channels.as_ref()),
                    ep.disabled,
                    ep.throttle_rate,
                    encode(&ep.metadata),
                    encode(&ep.headers),
                    ep.secret,
                    ep.created_at.as_millis(),
                    ep.updated_at.as_millis(),
                    ep.disabled_reason,
                    ep.disabled_at.map(Timestamp::as_millis),
                    ep.timeout_secs,
                ])
                .map_err(refused(taken::endpoint_uid(ep.uid.as_deref()), "application"))?;
                Ok(())
            })
            .await
    }

    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError> {
        let (app, key) = (app.clone(), id_or_uid.to_owned());
        self.db
            .read(move |conn| {
                let sql = format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = ?1 AND (e.id = ?2 OR e.uid = ?2)"
                );
                Ok(collect(conn, &sql, [app.as_str(), &key], rows::endpoint)?.pop())
            })
            .await
    }

    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError> {
        let (app, page) = (app.clone(), page.clone());
        self.db
            .read(move |conn| {
                let select =
                    format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = ?1");
                ListQuery::new(&select, vec![text(app.as_str())]).page(
                    conn,
                    "e.id",
                    false,
                    &page,
                    rows::endpoint,
                )
            })
            .await
    }

    async fn update_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let ep = endpoint.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        // Enabling a disabled endpoint starts its failure streak afresh (SET
                        // expressions read the row as it was).
                        "UPDATE endpoints SET uid = ?2, url = ?3, description = ?4, event_types = ?5,
                         channels = ?6, disabled = ?7, throttle_rate = ?8, metadata = ?9, headers = ?10,
                         secret = ?11, updated_at = ?12, disabled_reason = ?13, disabled_at = ?14,
                         timeout_secs = ?15,
                         failing_since = CASE WHEN disabled AND NOT ?7 THEN NULL ELSE failing_since END
                         WHERE id = ?1",
                    )?
                    .execute(params![
                        ep.id.as_str(),
                        ep.uid,
                        ep.url,
                        ep.description,
                        encode_opt(ep.event_types.as_ref()),
                        encode_opt(ep.channels.as_ref()),
                        ep.disabled,
                        ep.throttle_rate,
                        encode(&ep.metadata),
                        encode(&ep.headers),
                        ep.secret,
                        ep.updated_at.as_millis(),
                        ep.disabled_reason,
                        ep.disabled_at.map(Timestamp::as_millis),
                        ep.timeout_secs,
                    ])
                    .map_err(conflict(taken::endpoint_uid(ep.uid.as_deref())))?;
                touched(rows as u64, "endpoint")
            })
            .await
    }

    async fn delete_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let id = endpoint.id.clone();
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM endpoints WHERE id = ?1", [id.as_str()])?;
                touched(rows as u64, "endpoint")
            })
            .await
    }

    async fn create_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO event_types (name, description, schemas, archived, deprecated,
                     feature_flag, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?
                .execute(params![
                    et.name,
                    et.description,
                    encode_opt(et.schemas.as_ref()),
                    et.archived,
                    et.deprecated,
                    et.feature_flag,
                    et.created_at.as_millis(),
                    et.updated_at.as_millis(),
                ])
                .map_err(conflict(taken::event_type(&et.name)))?;
                Ok(())
            })
            .await
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        let name = name.to_owned();
        self.db
            .read(move |conn| {
                let sql = format!("SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE name = ?1");
                Ok(collect(conn, &sql, [name], rows::event_type)?.pop())
            })
            .await
    }

    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let page = page.clone();
        self.db
            .read(move |conn| {
                let select = format!(
                    "SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE (?1 OR archived = 0)"
                );
                ListQuery::new(&select, vec![Value::Integer(include_archived.into())]).page(
                    conn,
                    "name",
                    false,
                    &page,
                    rows::event_type,
                )
            })
            .await
    }

    async fn update_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE event_types SET description = ?2, schemas = ?3, archived = ?4,
                         deprecated = ?5, feature_flag = ?6, updated_at = ?7 WHERE name = ?1",
                    )?
                    .execute(params![
                        et.name,
                        et.description,
                        encode_opt(et.schemas.as_ref()),
                        et.archived,
                        et.deprecated,
                        et.feature_flag,
                        et.updated_at.as_millis(),
                    ])?;
                touched(rows as u64, "event type")
            })
            .await
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM event_types WHERE name = ?1", [name])?;
                touched(rows as u64, "event type")
            })
            .await
    }

    async fn create_message(&self, message: &Message) -> Result<CreatedMessage, StoreError> {
        let message = message.clone();
        self.db
            .write(move |conn| insert_message(conn, &message))
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
                    "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.app_id = ?1 AND (m.id = ?2 OR m.event_id = ?2)"
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
                if let Some(channel) = &filter.channel {
                    query.and(
                        "EXISTS (SELECT 1 FROM json_each(m.channels) WHERE value = ?)",
                        text(channel),
                    );
                }
                query.and_time("m.created_at < ?", filter.before);
                query.and_time("m.created_at > ?", filter.after);
                query.page(conn, "m.id", true, &page, rows::message)
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

    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        let token = token.clone();
        self.db
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        token.id,
                        token.token_hash,
                        token.app_id.as_ref().map(AppId::as_str),
                        token.created_at.as_millis(),
                        token.expires_at.map(Timestamp::as_millis),
                    ],
                )
                .map_err(refused(taken::token(), "application"))?;
                Ok(())
            })
            .await
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let hash = token_hash.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?1"
                ))?
                .query_row([hash], |row| {
                    Ok(ApiToken {
                        id: row.get(0)?,
                        token_hash: row.get(1)?,
                        app_id: row.get::<_, Option<String>>(2)?.map(AppId::from_stored),
                        created_at: Timestamp::from_millis(row.get(3)?),
                        expires_at: row.get::<_, Option<i64>>(4)?.map(Timestamp::from_millis),
                    })
                })
                .optional()
                .map_err(Into::into)
            })
            .await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        self.db
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL)",
                    [],
                    |row| row.get(0),
                )?)
            })
            .await
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let key = key.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT status, body FROM idempotent_responses WHERE key = ?1 AND expires_at > ?2",
                )?
                .query_row(params![key, now.as_millis()], |row| {
                    Ok(StoredResponse { status: row.get(0)?, body: row.get(1)? })
                })
                .optional()
                .map_err(Into::into)
            })
            .await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        let (key, response) = (key.to_owned(), response.clone());
        self.db
            .write(move |conn| {
                // An expired entry under the same key gives way; a live one wins.
                conn.prepare_cached(
                    "INSERT INTO idempotent_responses (key, status, body, expires_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body,
                     expires_at = excluded.expires_at WHERE idempotent_responses.expires_at <= ?5",
                )?
                .execute(params![key, response.status, response.body, expires_at.as_millis(), now.as_millis()])?;
                Ok(())
            })
            .await
    }
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
