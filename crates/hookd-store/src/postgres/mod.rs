//! The PostgreSQL [`Store`], for deployments where several hookd processes share one database.
//!
//! SQLite (the default) keeps hookd to one process and one file; PostgreSQL lets any number of
//! API and delivery processes work on the same state, with the database arbitrating between
//! them. The contract is the same, held by the same behavioural tests; only the SQL dialect
//! differs, so the SQL is written here for PostgreSQL and in [`crate::sqlite`] for SQLite,
//! while column lists, keyset pagination, JSON encoding and conflict texts are shared.
//!
//! Everything lives in the PostgreSQL schema `hookd` (every pooled connection has
//! `search_path=hookd`), so hookd can share a database with other software. The schema and its
//! tables are created and migrated by [`PgStore::connect`] from `migrations/postgres/`.
//!
//! Queries are prepared at run time (`sqlx::query`), never checked against a database at build
//! time, so building hookd needs no PostgreSQL.

mod queue;
mod rows;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message,
};
use hookd_core::{AppId, Timestamp};
use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Postgres};

use crate::columns::{
    APP_COLUMNS, ATTEMPT_COLUMNS, DELIVERY_COLUMNS, ENDPOINT_COLUMNS, ENDPOINT_WIDTH,
    EVENT_TYPE_COLUMNS, MESSAGE_COLUMNS, MESSAGE_WIDTH, TOKEN_COLUMNS,
};
use crate::error::{taken, touched};
use crate::json::{encode, encode_opt};
use crate::keyset::Keyset;
use crate::{
    ApiToken, AttemptFilter, CreatedMessage, MessageFilter, Page, PageRequest, Store, StoreError,
    StoredResponse,
};
use rows::Decoded;

/// The PostgreSQL schema that holds hookd's tables.
pub const SCHEMA: &str = "hookd";

/// Most connections one process holds. PostgreSQL's default server limit is 100 connections in
/// all, shared by every hookd process and anything else using the server.
const MAX_CONNECTIONS: u32 = 10;

/// How long a query waits for a free connection before the store reports itself unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// hookd's state in a PostgreSQL database.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://user:pass@host:port/db?…`), creates
    /// the `hookd` schema if needed and applies any pending migrations.
    ///
    /// Several processes may connect at once: migrations run under a PostgreSQL advisory lock
    /// (taken by `sqlx`'s migrator, per database), and the schema is created inside that lock
    /// too, since two concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Config(format!("invalid PostgreSQL URL: {e}")))?
            .options([("search_path", SCHEMA)]);
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        let mut migrator = sqlx::migrate!("./migrations/postgres");
        migrator.create_schema(SCHEMA);
        // With search_path=hookd, sqlx's bookkeeping table is hookd._sqlx_migrations.
        migrator.run(&pool).await.map_err(|e| match e {
            MigrateError::Execute(e) => StoreError::from(e),
            other => StoreError::Config(format!("cannot migrate the PostgreSQL schema: {other}")),
        })?;
        Ok(Self { pool })
    }

    /// The connection pool, for callers that keep their own tables in the `hookd` schema.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// SQL assembled at run time from constant pieces (column lists, filters); values are always
/// bound parameters, never spliced in.
fn sql(text: String) -> Query<'static, Postgres, PgArguments> {
    sqlx::query(AssertSqlSafe(text))
}

/// Maps a unique-key violation (SQLSTATE 23505) to a conflict described by `what`, and a
/// foreign-key violation (23503: the parent row does not exist) to `parent` not found; any
/// other failure is the database's.
fn refused(what: String, parent: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| match error.as_database_error() {
        Some(db) if db.is_unique_violation() => StoreError::Conflict(what),
        Some(db) if db.is_foreign_key_violation() => {
            StoreError::NotFound(db.constraint().map_or(parent, fk_parent))
        }
        _ => error.into(),
    }
}

/// Maps a unique-key violation to a conflict described by `what` (for writes without parents).
fn conflict(what: String) -> impl FnOnce(sqlx::Error) -> StoreError {
    refused(what, "referenced record")
}

/// Maps a foreign-key violation to its parent not found (for writes without unique keys).
fn missing(parent: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| match error.as_database_error() {
        Some(db) if db.is_foreign_key_violation() => {
            StoreError::NotFound(db.constraint().map_or(parent, fk_parent))
        }
        _ => error.into(),
    }
}

/// The record a foreign key (named `<table>_<column>_fkey`, PostgreSQL's default) refers to.
fn fk_parent(constraint: &str) -> &'static str {
    if constraint.ends_with("_message_id_fkey") {
        "message"
    } else if constraint.ends_with("_endpoint_id_fkey") {
        "endpoint"
    } else if constraint.ends_with("_app_id_fkey") {
        "application"
    } else {
        "referenced record"
    }
}

/// One bound value of a [`ListQuery`].
enum Param {
    Text(String),
    Texts(Vec<String>),
    Int(i64),
    Bool(bool),
}

/// A list query: `select … where <fixed conditions>` plus optional filters and a keyset page.
struct ListQuery {
    sql: String,
    params: Vec<Param>,
}

impl ListQuery {
    /// `select` refers to `params` as `$1`, `$2`, ….
    fn new(select: &str, params: Vec<Param>) -> Self {
        Self {
            sql: select.to_owned(),
            params,
        }
    }

    /// Adds ` AND <condition>` with `?` standing for `value`.
    fn and(&mut self, condition: &str, value: Param) {
        self.params.push(value);
        let placeholder = format!("${}", self.params.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace('?', &placeholder));
    }

    fn and_time(&mut self, condition: &str, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.and(condition, Param::Int(at.as_millis()));
        }
    }

    /// Finishes the query with a page on `column` and runs it.
    async fn page<T>(
        mut self,
        pool: &PgPool,
        column: &str,
        descending: bool,
        page: &PageRequest,
        decode: impl Fn(&PgRow) -> Decoded<T>,
    ) -> Result<Page<T>, StoreError> {
        let keyset = Keyset::new(
            column,
            descending,
            page,
            &format!("${}", self.params.len() + 1),
        );
        if let Some(key) = &keyset.key {
            self.params.push(Param::Text(key.clone()));
        }
        self.sql.push_str(&keyset.condition);
        self.sql.push_str(&keyset.order_limit);
        let query = self
            .params
            .into_iter()
            .fold(sql(self.sql), |query, param| match param {
                Param::Text(value) => query.bind(value),
                Param::Texts(values) => query.bind(values),
                Param::Int(value) => query.bind(value),
                Param::Bool(value) => query.bind(value),
            });
        let rows = query.fetch_all(pool).await?;
        let items = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        Ok(keyset.page(items))
    }
}

fn text(value: &str) -> Param {
    Param::Text(value.to_owned())
}

/// Runs a query expected to match at most one row and decodes it.
async fn fetch_one_of<T>(
    query: Query<'static, Postgres, PgArguments>,
    pool: &PgPool,
    decode: impl Fn(&PgRow) -> Decoded<T>,
) -> Result<Option<T>, StoreError> {
    query
        .fetch_optional(pool)
        .await?
        .as_ref()
        .map(decode)
        .transpose()
}

#[async_trait]
impl Store for PgStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO applications (id, uid, name, metadata, throttle_rate, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(app.id.as_str())
        .bind(app.uid.as_deref())
        .bind(&app.name)
        .bind(encode(&app.metadata))
        .bind(app.throttle_rate.map(i64::from))
        .bind(app.created_at.as_millis())
        .bind(app.updated_at.as_millis())
        .execute(&self.pool)
        .await
        .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        Ok(())
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        // Should one application's uid equal another's id, the id wins.
        let query = sql(format!(
            "SELECT {APP_COLUMNS} FROM applications WHERE id = $1 OR uid = $1
             ORDER BY id = $1 DESC LIMIT 1"
        ))
        .bind(id_or_uid);
        fetch_one_of(query, &self.pool, rows::app).await
    }

    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError> {
        let select = format!("SELECT {APP_COLUMNS} FROM applications WHERE TRUE");
        ListQuery::new(&select, vec![])
            .page(&self.pool, "id", false, page, rows::app)
            .await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE applications SET uid = $2, name = $3, metadata = $4, throttle_rate = $5,
             updated_at = $6 WHERE id = $1",
        )
        .bind(app.id.as_str())
        .bind(app.uid.as_deref())
        .bind(&app.name)
        .bind(encode(&app.metadata))
        .bind(app.throttle_rate.map(i64::from))
        .bind(app.updated_at.as_millis())
        .execute(&self.pool)
        .await
        .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        touched(done.rows_affected(), "application")
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM applications WHERE id = $1")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        touched(done.rows_affected(), "application")
    }

    async fn create_endpoint(&self, ep: &Endpoint) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO endpoints (id, app_id, uid, url, description, event_types, channels,
             disabled, throttle_rate, metadata, headers, secret, created_at, updated_at,
             disabled_reason, disabled_at, timeout_secs)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .bind(ep.id.as_str())
        .bind(ep.app_id.as_str())
        .bind(ep.uid.as_deref())
        .bind(&ep.url)
        .bind(&ep.description)
        .bind(encode_opt(ep.event_types.as_ref()))
        .bind(encode_opt(ep.channels.as_ref()))
        .bind(ep.disabled)
        .bind(ep.throttle_rate.map(i64::from))
        .bind(encode(&ep.metadata))
        .bind(encode(&ep.headers))
        .bind(&ep.secret)
        .bind(ep.created_at.as_millis())
        .bind(ep.updated_at.as_millis())
        .bind(ep.disabled_reason.as_deref())
        .bind(ep.disabled_at.map(Timestamp::as_millis))
        .bind(ep.timeout_secs.map(i64::from))
        .execute(&self.pool)
        .await
        .map_err(refused(
            taken::endpoint_uid(ep.uid.as_deref()),
            "application",
        ))?;
        Ok(())
    }

    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError> {
        let query = sql(format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = $1 AND (e.id = $2 OR e.uid = $2)
             ORDER BY e.id = $2 DESC LIMIT 1"
        ))
        .bind(app.as_str())
        .bind(id_or_uid);
        fetch_one_of(query, &self.pool, rows::endpoint).await
    }

    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError> {
        let select = format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = $1");
        ListQuery::new(&select, vec![text(app.as_str())])
            .page(&self.pool, "e.id", false, page, rows::endpoint)
            .await
    }

    async fn update_endpoint(&self, ep: &Endpoint) -> Result<(), StoreError> {
        // Enabling a disabled endpoint starts its failure streak afresh (SET expressions read
        // the row as it was).
        let done = sqlx::query(
            "UPDATE endpoints SET uid = $2, url = $3, description = $4, event_types = $5,
             channels = $6, disabled = $7, throttle_rate = $8, metadata = $9, headers = $10,
             secret = $11, updated_at = $12, disabled_reason = $13, disabled_at = $14,
             timeout_secs = $15,
             failing_since = CASE WHEN disabled AND NOT $7 THEN NULL ELSE failing_since END
             WHERE id = $1",
        )
        .bind(ep.id.as_str())
        .bind(ep.uid.as_deref())
        .bind(&ep.url)
        .bind(&ep.description)
        .bind(encode_opt(ep.event_types.as_ref()))
        .bind(encode_opt(ep.channels.as_ref()))
        .bind(ep.disabled)
        .bind(ep.throttle_rate.map(i64::from))
        .bind(encode(&ep.metadata))
        .bind(encode(&ep.headers))
        .bind(&ep.secret)
        .bind(ep.updated_at.as_millis())
        .bind(ep.disabled_reason.as_deref())
        .bind(ep.disabled_at.map(Timestamp::as_millis))
        .bind(ep.timeout_secs.map(i64::from))
        .execute(&self.pool)
        .await
        .map_err(conflict(taken::endpoint_uid(ep.uid.as_deref())))?;
        touched(done.rows_affected(), "endpoint")
    }

    async fn delete_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM endpoints WHERE id = $1")
            .bind(endpoint.id.as_str())
            .execute(&self.pool)
            .await?;
        touched(done.rows_affected(), "endpoint")
    }

    async fn create_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO event_types (name, description, schemas, archived, deprecated,
             feature_flag, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&et.name)
        .bind(&et.description)
        .bind(encode_opt(et.schemas.as_ref()))
        .bind(et.archived)
        .bind(et.deprecated)
        .bind(et.feature_flag.as_deref())
        .bind(et.created_at.as_millis())
        .bind(et.updated_at.as_millis())
        .execute(&self.pool)
        .await
        .map_err(conflict(taken::event_type(&et.name)))?;
        Ok(())
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        let query = sql(format!(
            "SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE name = $1"
        ))
        .bind(name);
        fetch_one_of(query, &self.pool, rows::event_type).await
    }

    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let select =
            format!("SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE ($1 OR NOT archived)");
        ListQuery::new(&select, vec![Param::Bool(include_archived)])
            .page(&self.pool, "name", false, page, rows::event_type)
            .await
    }

    async fn update_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE event_types SET description = $2, schemas = $3, archived = $4,
             deprecated = $5, feature_flag = $6, updated_at = $7 WHERE name = $1",
        )
        .bind(&et.name)
        .bind(&et.description)
        .bind(encode_opt(et.schemas.as_ref()))
        .bind(et.archived)
        .bind(et.deprecated)
        .bind(et.feature_flag.as_deref())
        .bind(et.updated_at.as_millis())
        .execute(&self.pool)
        .await?;
        touched(done.rows_affected(), "event type")
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM event_types WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        touched(done.rows_affected(), "event type")
    }

    async fn create_message(&self, message: &Message) -> Result<CreatedMessage, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(message.id.as_str())
        .bind(message.app_id.as_str())
        .bind(&message.event_type)
        .bind(message.event_id.as_deref())
        .bind(encode_opt(message.channels.as_ref()))
        .bind(message.payload.as_deref())
        .bind(message.created_at.as_millis())
        .execute(&mut *tx)
        .await
        // Dropping `tx` on this early return rolls it back: nothing is written.
        .map_err(refused(
            taken::event_id(message.event_id.as_deref()),
            "application",
        ))?;
        let endpoints = sql(format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = $1 AND NOT e.disabled"
        ))
        .bind(message.app_id.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(rows::endpoint)
        .collect::<Result<Vec<_>, _>>()?;
        let routed: Vec<&str> = endpoints
            .iter()
            .filter(|e| e.subscribes_to(&message.event_type, message.channels.as_deref()))
            .map(|e| e.id.as_str())
            .collect();
        if !routed.is_empty() {
            // One statement for every delivery, however many endpoints subscribe.
            sqlx::query(
                "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at)
                 SELECT $1, endpoint_id, $2, 0, $3, $3 FROM UNNEST($4::text[]) AS routed(endpoint_id)",
            )
            .bind(message.id.as_str())
            .bind(i64::from(DeliveryStatus::Pending.code()))
            .bind(message.created_at.as_millis())
            .bind(&routed)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(CreatedMessage {
            message: message.clone(),
            deliveries: routed.len(),
        })
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
        if let Some(channel) = &filter.channel {
            // channels is JSON text (a list of strings) or NULL, which matches nothing.
            query.and(
                "? = ANY(SELECT json_array_elements_text(m.channels::json))",
                text(channel),
            );
        }
        query.and_time("m.created_at < ?", filter.before);
        query.and_time("m.created_at > ?", filter.after);
        query
            .page(&self.pool, "m.id", true, page, rows::message)
            .await
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

    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&token.id)
        .bind(&token.token_hash)
        .bind(token.app_id.as_ref().map(AppId::as_str))
        .bind(token.created_at.as_millis())
        .bind(token.expires_at.map(Timestamp::as_millis))
        .execute(&self.pool)
        .await
        .map_err(refused(taken::token(), "application"))?;
        Ok(())
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let query = sql(format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = $1"
        ))
        .bind(token_hash);
        fetch_one_of(query, &self.pool, rows::token).await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL)")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let query = sqlx::query(
            "SELECT status, body FROM idempotent_responses WHERE key = $1 AND expires_at > $2",
        )
        .bind(key)
        .bind(now.as_millis());
        fetch_one_of(query, &self.pool, rows::stored_response).await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        // An expired entry under the same key gives way; a live one wins.
        sqlx::query(
            "INSERT INTO idempotent_responses (key, status, body, expires_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body,
             expires_at = excluded.expires_at WHERE idempotent_responses.expires_at <= $5",
        )
        .bind(key)
        .bind(i64::from(response.status))
        .bind(&response.body)
        .bind(expires_at.as_millis())
        .bind(now.as_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
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
