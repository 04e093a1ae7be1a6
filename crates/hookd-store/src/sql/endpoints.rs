//! [`EndpointStore`] on both databases: its reads and the keys' compare-and-swap are shared
//! statements; the writes that take operational events with them are each backend's own
//! transactions ([`EventWrites`]).

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, Ordering, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};

use super::rows::{self, Columns, Decoded, text};
use super::{Arg, Database, Dialect, ListQuery, Statement, args, sql};
use crate::columns::ENDPOINT_COLUMNS;
use crate::error::touched;
use crate::json::{encode, encode_opt};
use crate::{EndpointStore, EndpointUpdate, Page, PageRequest, SealedRow, StoreError};

/// What [`EndpointStore`] asks of each backend itself: the writes that commit operational
/// events in the same transaction (SQLite: one writer job; PostgreSQL: a transaction that
/// locks the endpoint's row).
#[async_trait]
pub trait EventWrites: Database {
    /// [`EndpointStore::create_endpoint_with_events`].
    async fn insert_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError>;

    /// [`EndpointStore::update_endpoint_with`].
    async fn update_with_events(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError>;

    /// [`EndpointStore::delete_endpoint_with_events`].
    async fn delete_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError>;
}

#[async_trait]
impl<D: EventWrites> EndpointStore for D {
    async fn create_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        self.insert_with_events(endpoint, events).await
    }

    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError> {
        self.read_one(get(app, id_or_uid), rows::endpoint).await
    }

    async fn count_endpoints(&self, app: &AppId) -> Result<u64, StoreError> {
        let count = self.read_one(count(app), |row| rows::int(row, 0)).await?;
        Ok(count.unwrap_or(0))
    }

    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError> {
        let query = list(D::DIALECT, app, "e.kind = 'http'").page("e.id", false, page);
        self.read_page(query, rows::endpoint).await
    }

    async fn list_destinations(
        &self,
        app: &AppId,
        page: &PageRequest,
        extensions: bool,
    ) -> Result<Page<Endpoint>, StoreError> {
        let kinds = if extensions {
            "e.kind <> 'http'"
        } else {
            "e.kind NOT IN ('http', 'natsJetStream', 'kafka')"
        };
        let query = list(D::DIALECT, app, kinds).page("e.id", false, page);
        self.read_page(query, rows::endpoint).await
    }

    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
        self.update_with_events(update).await
    }

    async fn replace_endpoint_keys(
        &self,
        endpoint: &EndpointId,
        old: &SealedKeys,
        new: &SealedKeys,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let swapped = self
            .write(replace_keys(endpoint, old, new, at), None)
            .await?;
        if swapped == 0 {
            let found = self.read_one(exists(endpoint), |row| row.bool(0)).await?;
            touched(u64::from(found == Some(true)), "endpoint")?;
        }
        Ok(swapped == 1)
    }

    async fn list_sealed_keys(
        &self,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<SealedRow>, StoreError> {
        self.read(list_sealed_keys(after, limit), sealed_row).await
    }

    async fn replace_sealed_row(
        &self,
        old: &SealedKeys,
        new: &SealedRow,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let headers = encode(&new.headers);
        let sql = sql!(
            "UPDATE endpoints SET secret = ?3, headers = ?4, updated_at = ?5
             WHERE id = ?1 AND secret = ?2"
        );
        let args = args![
            new.id.as_str(),
            old.as_str(),
            new.keys.as_str(),
            headers,
            at
        ];
        Ok(self.write(Statement::new(sql, args), None).await? == 1)
    }

    async fn delete_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        self.delete_with_events(endpoint, events).await
    }
}

/// The endpoint's id, then the fields an update writes too, as `?1` to `?20`.
fn id_and_fields(ep: &Endpoint) -> Vec<Arg<'_>> {
    args![
        ep.id.as_str(),
        ep.uid.as_deref(),
        ep.url.as_str(),
        ep.description.as_str(),
        encode_opt(ep.event_types.as_ref()),
        encode_opt(ep.channels.as_ref()),
        ep.disabled,
        ep.throttle_rate,
        encode(&ep.metadata),
        encode(&ep.headers),
        ep.updated_at,
        ep.disabled_reason.as_deref(),
        ep.disabled_at,
        ep.timeout_secs,
        ep.max_concurrency,
        ep.ordering == Ordering::Strict,
        ep.destination.kind(),
        ep.destination.stored_config(),
        ep.batch_size,
        ep.max_wait_secs,
    ]
}

pub fn insert(ep: &Endpoint) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO endpoints (id, uid, url, description, event_types, channels, disabled,
         throttle_rate, metadata, headers, updated_at, disabled_reason, disabled_at,
         timeout_secs, max_concurrency, strict_order, kind, config, batch_size, max_wait_secs,
         app_id, secret, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
         ?19, ?20, ?21, ?22, ?23)"
    );
    let mut args = id_and_fields(ep);
    args.extend(args![ep.app_id.as_str(), ep.keys.as_str(), ep.created_at]);
    Statement::new(sql, args)
}

/// The endpoint of `app` whose id or uid is `id_or_uid`; should one endpoint's uid equal
/// another's id, the id wins.
fn get<'a>(app: &'a AppId, id_or_uid: &'a str) -> Statement<'a> {
    let sql = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        " FROM endpoints e WHERE e.app_id = ?1 AND (e.id = ?2 OR e.uid = ?2)
         ORDER BY e.id = ?2 DESC LIMIT 1"
    );
    Statement::new(sql, args![app.as_str(), id_or_uid])
}

/// The endpoint `id` of `app`.
pub fn get_by_id<'a>(app: &'a AppId, id: &'a EndpointId) -> Statement<'a> {
    let sql = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        " FROM endpoints e WHERE e.id = ?1 AND e.app_id = ?2"
    );
    Statement::new(sql, args![id.as_str(), app.as_str()])
}

fn count(app: &AppId) -> Statement<'_> {
    let sql = sql!("SELECT COUNT(*) FROM endpoints WHERE app_id = ?1");
    Statement::new(sql, args![app.as_str()])
}

/// The endpoints of `app` whose kind meets `kinds` (a condition on `e.kind`).
fn list<'a>(dialect: Dialect, app: &'a AppId, kinds: &'static str) -> ListQuery<'a> {
    let select = sql!(
        "SELECT ",
        ENDPOINT_COLUMNS,
        " FROM endpoints e WHERE e.app_id = ?1"
    );
    let mut query = ListQuery::new(dialect, select, args![app.as_str()]);
    query.and_plain(kinds);
    query
}

/// Whether the stored endpoint is disabled, and its sealed keys: [`state`]. On PostgreSQL
/// the row stays locked until the transaction ends, so no other writer changes them before
/// the update; SQLite's writes are serial already.
pub fn stored_state(dialect: Dialect, id: &EndpointId) -> Statement<'_> {
    const SELECT: &str = "SELECT disabled, secret FROM endpoints WHERE id = ?1";
    let sql = match dialect {
        Dialect::Sqlite => sql!(SELECT).only(Dialect::Sqlite),
        Dialect::Postgres => sql!(SELECT, " FOR UPDATE").only(Dialect::Postgres),
    };
    Statement::new(sql, args![id.as_str()])
}

/// A row of [`stored_state`].
pub fn state(row: &dyn Columns) -> Decoded<(bool, String)> {
    Ok((row.bool(0)?, text(row, 1)?))
}

/// Writes the endpoint's mutable fields, and `new_keys` if given. Enabling a disabled
/// endpoint starts its failure streak afresh (SET expressions read the row as it was).
pub fn update<'a>(ep: &'a Endpoint, new_keys: Option<&'a SealedKeys>) -> Statement<'a> {
    let sql = sql!(
        "UPDATE endpoints SET uid = ?2, url = ?3, description = ?4, event_types = ?5,
         channels = ?6, disabled = ?7, throttle_rate = ?8, metadata = ?9, headers = ?10,
         updated_at = ?11, disabled_reason = ?12, disabled_at = ?13, timeout_secs = ?14,
         max_concurrency = ?15, strict_order = ?16, kind = ?17, config = ?18, batch_size = ?19,
         max_wait_secs = ?20, secret = COALESCE(?21, secret),
         failing_since = CASE WHEN disabled AND NOT ?7 THEN NULL ELSE failing_since END
         WHERE id = ?1"
    );
    let mut args = id_and_fields(ep);
    args.extend(args![new_keys.map(SealedKeys::as_str)]);
    Statement::new(sql, args)
}

/// Replaces the endpoint's keys with `new` if they are still `old`.
fn replace_keys<'a>(
    id: &'a EndpointId,
    old: &'a SealedKeys,
    new: &'a SealedKeys,
    at: Timestamp,
) -> Statement<'a> {
    let sql =
        sql!("UPDATE endpoints SET secret = ?3, updated_at = ?4 WHERE id = ?1 AND secret = ?2");
    Statement::new(sql, args![id.as_str(), old.as_str(), new.as_str(), at])
}

/// Every endpoint's sealed keys and clear headers in id order after `after`: [`sealed_row`].
fn list_sealed_keys(after: Option<&EndpointId>, limit: usize) -> Statement<'_> {
    let sql = sql!("SELECT id, secret, headers FROM endpoints WHERE id > ?1 ORDER BY id LIMIT ?2");
    Statement::new(sql, args![after.map_or("", EndpointId::as_str), limit])
}

/// A row of [`list_sealed_keys`].
pub(super) fn sealed_row(row: &dyn Columns) -> Decoded<SealedRow> {
    Ok(SealedRow {
        id: EndpointId::from_stored(text(row, 0)?),
        keys: SealedKeys::from_stored(text(row, 1)?),
        headers: crate::json::decode(&text(row, 2)?)?,
    })
}

pub fn delete(id: &EndpointId) -> Statement<'_> {
    Statement::new(
        sql!("DELETE FROM endpoints WHERE id = ?1"),
        args![id.as_str()],
    )
}

/// Whether the endpoint exists: one boolean.
pub fn exists(id: &EndpointId) -> Statement<'_> {
    let sql = sql!("SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = ?1)");
    Statement::new(sql, args![id.as_str()])
}
