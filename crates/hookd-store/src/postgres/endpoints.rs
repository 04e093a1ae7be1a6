//! Endpoint writes with their operational events on PostgreSQL
//! (`crate::sql::endpoints::EventWrites`): each is one transaction, an update's holding the
//! endpoint's row locked from its read to its write.

use async_trait::async_trait;
use hookd_core::EndpointId;
use hookd_core::model::{Endpoint, Message};
use sqlx::PgExecutor;

use super::publish::insert_events;
use super::rows::{fetch_one, run};
use super::{PgStore, conflict, refused};
use crate::error::{taken, touched};
use crate::sql::Dialect;
use crate::sql::endpoints::{self as sql, EventWrites};
use crate::store::check_disabled_as_read;
use crate::{EndpointUpdate, StoreError};

#[async_trait]
impl EventWrites for PgStore {
    async fn insert_with_events(
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

    async fn update_with_events(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
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

    async fn delete_with_events(
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
