//! [`EndpointStore`] on PostgreSQL: endpoints.

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};
use sqlx::PgExecutor;

use super::messages::insert_events;
use super::rows::{self, fetch, fetch_one, page, run};
use super::{PgStore, conflict, refused};
use crate::error::{taken, touched};
use crate::sql::{Dialect, endpoints as sql};
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
        run(&mut *tx, sql::insert(ep)).await.map_err(refused(
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
        fetch_one(&self.pool, sql::get(app, id_or_uid), rows::endpoint).await
    }

    async fn list_endpoints(
        &self,
        app: &AppId,
        page_of: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError> {
        let query = sql::list(Dialect::Postgres, app).page("e.id", false, page_of);
        page(&self.pool, query, rows::endpoint).await
    }

    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
        let ep = update.endpoint;
        let mut tx = self.pool.begin().await?;
        let state = sql::stored_state(Dialect::Postgres, &ep.id);
        let (was_disabled, stored_keys) = fetch_one(&mut *tx, state, sql::state)
            .await?
            .ok_or(StoreError::NotFound("endpoint"))?;
        check_disabled_as_read(update.disabled_as_read, was_disabled, ep.disabled)?;
        if update
            .keys
            .is_some_and(|swap| swap.old.as_str() != stored_keys)
        {
            return Ok(false);
        }
        let new_keys = update.keys.map(|swap| swap.new);
        run(&mut *tx, sql::update(ep, new_keys))
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
        let swapped = run(&self.pool, sql::replace_keys(endpoint, old, new, at)).await?;
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
        let statement = sql::list_sealed_keys(after, limit);
        fetch(&self.pool, statement, sql::sealed_keys).await
    }

    async fn delete_endpoint_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        touched(run(&mut *tx, sql::delete(&endpoint.id)).await?, "endpoint")?;
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
    let exists = fetch_one(conn, sql::exists(id), |row| row.bool(0)).await?;
    touched(u64::from(exists == Some(true)), "endpoint")
}
