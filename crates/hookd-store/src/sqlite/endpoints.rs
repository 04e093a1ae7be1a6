//! [`EndpointStore`] on SQLite: endpoints.

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, Ordering, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::messages::insert_events;
use super::rows::{self, ENDPOINT_COLUMNS, collect};
use super::{ListQuery, SqliteStore, conflict, refused, text};
use crate::error::{taken, touched};
use crate::json::{encode, encode_opt};
use crate::store::check_disabled_as_read;
use crate::{EndpointStore, EndpointUpdate, Page, PageRequest, StoreError};

#[async_trait]
impl EndpointStore for SqliteStore {
    async fn create_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let (ep, events) = (endpoint.clone(), events.to_vec());
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO endpoints (id, app_id, uid, url, description, event_types, channels,
                     disabled, throttle_rate, metadata, headers, secret, created_at, updated_at,
                     disabled_reason, disabled_at, timeout_secs, max_concurrency, strict_order)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
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
                    ep.keys.as_str(),
                    ep.created_at.as_millis(),
                    ep.updated_at.as_millis(),
                    ep.disabled_reason,
                    ep.disabled_at.map(Timestamp::as_millis),
                    ep.timeout_secs,
                    ep.max_concurrency,
                    ep.ordering == Ordering::Strict,
                ])
                .map_err(refused(taken::endpoint_uid(ep.uid.as_deref()), "application"))?;
                insert_events(conn, &events)
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
                    "SELECT {ENDPOINT_COLUMNS} FROM endpoints e WHERE e.app_id = ?1 AND (e.id = ?2 OR e.uid = ?2)
                     ORDER BY e.id = ?2 DESC LIMIT 1"
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

    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
        let ep = update.endpoint.clone();
        let (events, on_toggle) = (update.events.to_vec(), update.on_toggle.to_vec());
        let disabled_as_read = update.disabled_as_read;
        let keys = update
            .keys
            .map(|swap| (swap.old.as_str().to_owned(), swap.new.as_str().to_owned()));
        self.db
            .write(move |conn| {
                // Writes are serial: nothing changes the row between this read and the update.
                let (was_disabled, stored_keys) = stored_state(conn, &ep.id)?;
                check_disabled_as_read(disabled_as_read, was_disabled, ep.disabled)?;
                if keys.as_ref().is_some_and(|(old, _)| *old != stored_keys) {
                    return Ok(false);
                }
                conn
                    .prepare_cached(
                        // Enabling a disabled endpoint starts its failure streak afresh (SET
                        // expressions read the row as it was).
                        "UPDATE endpoints SET uid = ?2, url = ?3, description = ?4, event_types = ?5,
                         channels = ?6, disabled = ?7, throttle_rate = ?8, metadata = ?9, headers = ?10,
                         updated_at = ?11, disabled_reason = ?12, disabled_at = ?13, timeout_secs = ?14,
                         max_concurrency = ?15, secret = COALESCE(?16, secret), strict_order = ?17,
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
                        ep.updated_at.as_millis(),
                        ep.disabled_reason,
                        ep.disabled_at.map(Timestamp::as_millis),
                        ep.timeout_secs,
                        ep.max_concurrency,
                        keys.as_ref().map(|(_, new)| new),
                        ep.ordering == Ordering::Strict,
                    ])
                    .map_err(conflict(taken::endpoint_uid(ep.uid.as_deref())))?;
                insert_events(conn, &events)?;
                if was_disabled != ep.disabled {
                    insert_events(conn, &on_toggle)?;
                }
                Ok(true)
            })
            .await
    }

    async fn replace_endpoint_keys(
        &self,
        endpoint: &EndpointId,
        old: &SealedKeys,
        new: &SealedKeys,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let (id, old, new) = (endpoint.clone(), old.clone(), new.clone());
        self.db
            .write(move |conn| {
                let swapped = conn.execute(
                    "UPDATE endpoints SET secret = ?3, updated_at = ?4 WHERE id = ?1 AND secret = ?2",
                    params![id.as_str(), old.as_str(), new.as_str(), at.as_millis()],
                )?;
                if swapped == 0 {
                    require_endpoint(conn, &id)?;
                }
                Ok(swapped == 1)
            })
            .await
    }

    async fn list_sealed_keys(
        &self,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<(EndpointId, SealedKeys)>, StoreError> {
        let after = after.map_or_else(String::new, |id| id.as_str().to_owned());
        self.db
            .read(move |conn| {
                collect(
                    conn,
                    "SELECT id, secret FROM endpoints WHERE id > ?1 ORDER BY id LIMIT ?2",
                    params![after, limit as i64],
                    |row| {
                        Ok((
                            EndpointId::from_stored(row.get(0)?),
                            SealedKeys::from_stored(row.get(1)?),
                        ))
                    },
                )
            })
            .await
    }

    async fn delete_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let (id, events) = (endpoint.id.clone(), events.to_vec());
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM endpoints WHERE id = ?1", [id.as_str()])?;
                touched(rows as u64, "endpoint")?;
                insert_events(conn, &events)
            })
            .await
    }
}

/// Whether the stored endpoint is disabled, and its sealed keys; not found if there is none.
fn stored_state(conn: &Connection, id: &EndpointId) -> Result<(bool, String), StoreError> {
    conn.prepare_cached("SELECT disabled, secret FROM endpoints WHERE id = ?1")?
        .query_row([id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?
        .ok_or(StoreError::NotFound("endpoint"))
}

/// Fails with not found unless the endpoint exists (after a conditional write touched nothing).
pub(super) fn require_endpoint(conn: &Connection, id: &EndpointId) -> Result<(), StoreError> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = ?1)",
        [id.as_str()],
        |row| row.get(0),
    )?;
    touched(u64::from(exists), "endpoint")
}
