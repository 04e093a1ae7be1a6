//! [`EndpointStore`] on PostgreSQL: endpoints.

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, Ordering, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};

use sqlx::PgExecutor;

use super::messages::insert_events;
use super::rows;
use super::{ListQuery, PgStore, conflict, fetch_one_of, refused, sql, text};
use crate::columns::ENDPOINT_COLUMNS;
use crate::error::{taken, touched};
use crate::json::{encode, encode_opt};
use crate::store::check_disabled_as_read;
use crate::{EndpointStore, EndpointUpdate, Page, PageRequest, StoreError};

#[async_trait]
impl EndpointStore for PgStore {
    async fn create_endpoint_with_events(
        &self,
        ep: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        // Any early return drops `tx` uncommitted: nothing is written.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO endpoints (id, app_id, uid, url, description, event_types, channels,
             disabled, throttle_rate, metadata, headers, secret, created_at, updated_at,
             disabled_reason, disabled_at, timeout_secs, max_concurrency, strict_order)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
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
        .bind(ep.keys.as_str())
        .bind(ep.created_at.as_millis())
        .bind(ep.updated_at.as_millis())
        .bind(ep.disabled_reason.as_deref())
        .bind(ep.disabled_at.map(Timestamp::as_millis))
        .bind(ep.timeout_secs.map(i64::from))
        .bind(ep.max_concurrency.map(i64::from))
        .bind(ep.ordering == Ordering::Strict)
        .execute(&mut *tx)
        .await
        .map_err(refused(
            taken::endpoint_uid(ep.uid.as_deref()),
            "application",
        ))?;
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
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

    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
        let ep = update.endpoint;
        let mut tx = self.pool.begin().await?;
        // Locked until commit: no other writer changes `disabled` or the keys between this
        // read and the update.
        let (was_disabled, stored_keys): (bool, String) =
            sqlx::query_as("SELECT disabled, secret FROM endpoints WHERE id = $1 FOR UPDATE")
                .bind(ep.id.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound("endpoint"))?;
        check_disabled_as_read(update.disabled_as_read, was_disabled, ep.disabled)?;
        if update
            .keys
            .is_some_and(|swap| swap.old.as_str() != stored_keys)
        {
            return Ok(false);
        }
        // Enabling a disabled endpoint starts its failure streak afresh (SET expressions read
        // the row as it was).
        sqlx::query(
            "UPDATE endpoints SET uid = $2, url = $3, description = $4, event_types = $5,
             channels = $6, disabled = $7, throttle_rate = $8, metadata = $9, headers = $10,
             updated_at = $11, disabled_reason = $12, disabled_at = $13, timeout_secs = $14,
             max_concurrency = $15, secret = COALESCE($16, secret), strict_order = $17,
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
        .bind(ep.updated_at.as_millis())
        .bind(ep.disabled_reason.as_deref())
        .bind(ep.disabled_at.map(Timestamp::as_millis))
        .bind(ep.timeout_secs.map(i64::from))
        .bind(ep.max_concurrency.map(i64::from))
        .bind(update.keys.map(|swap| swap.new.as_str()))
        .bind(ep.ordering == Ordering::Strict)
        .execute(&mut *tx)
        .await
        .map_err(conflict(taken::endpoint_uid(ep.uid.as_deref())))?;
        insert_events(&mut tx, update.events).await?;
        if was_disabled != ep.disabled {
            insert_events(&mut tx, update.on_toggle).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn replace_endpoint_keys(
        &self,
        endpoint: &EndpointId,
        old: &SealedKeys,
        new: &SealedKeys,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let swapped = sqlx::query(
            "UPDATE endpoints SET secret = $3, updated_at = $4 WHERE id = $1 AND secret = $2",
        )
        .bind(endpoint.as_str())
        .bind(old.as_str())
        .bind(new.as_str())
        .bind(at.as_millis())
        .execute(&self.pool)
        .await?
        .rows_affected();
        if swapped == 0 {
            require_endpoint(&self.pool, endpoint).await?;
        }
        Ok(swapped == 1)
    }

    async fn list_sealed_keys(
        &self,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<(EndpointId, SealedKeys)>, StoreError> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT id, secret FROM endpoints WHERE id > $1 ORDER BY id LIMIT $2")
                .bind(after.map_or("", EndpointId::as_str))
                .bind(limit as i64)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(id, sealed)| (EndpointId::from_stored(id), SealedKeys::from_stored(sealed)))
            .collect())
    }

    async fn delete_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query("DELETE FROM endpoints WHERE id = $1")
            .bind(endpoint.id.as_str())
            .execute(&mut *tx)
            .await?;
        touched(done.rows_affected(), "endpoint")?;
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Fails with not found unless the endpoint exists (after a conditional write touched nothing).
pub(super) async fn require_endpoint(
    conn: impl PgExecutor<'_>,
    id: &EndpointId,
) -> Result<(), StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = $1)")
        .bind(id.as_str())
        .fetch_one(conn)
        .await?;
    touched(u64::from(exists), "endpoint")
}
