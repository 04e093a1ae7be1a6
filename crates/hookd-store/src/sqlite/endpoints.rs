//! Endpoint writes with their operational events on SQLite
//! (`crate::sql::endpoints::EventWrites`): each is one job of the writer, so nothing changes
//! the row between its read and its update.

use async_trait::async_trait;
use hookd_core::EndpointId;
use hookd_core::model::{Endpoint, Message};
use rusqlite::Connection;

use super::publish::insert_events;
use super::rows::{fetch_one, run};
use super::{SqliteStore, conflict, refused};
use crate::error::{taken, touched};
use crate::sql::Dialect;
use crate::sql::endpoints::{self as sql, EventWrites};
use crate::store::check_disabled_as_read;
use crate::{EndpointUpdate, StoreError};

#[async_trait]
impl EventWrites for SqliteStore {
    async fn insert_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let (ep, events) = (endpoint.clone(), events.to_vec());
        self.db
            .write(move |conn| {
                run(conn, &sql::insert(&ep)).map_err(refused(
                    taken::endpoint_uid(ep.uid.as_deref()),
                    "application",
                ))?;
                insert_events(conn, &events)
            })
            .await
    }

    async fn update_with_events(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
        let ep = update.endpoint.clone();
        let (events, on_toggle) = (update.events.to_vec(), update.on_toggle.to_vec());
        let disabled_as_read = update.disabled_as_read;
        let keys = update.keys.map(|swap| (swap.old.clone(), swap.new.clone()));
        self.db
            .write(move |conn| {
                let state = sql::stored_state(Dialect::Sqlite, &ep.id);
                let (was_disabled, stored_keys) =
                    fetch_one(conn, &state, sql::state)?.ok_or(StoreError::NotFound("endpoint"))?;
                check_disabled_as_read(disabled_as_read, was_disabled, ep.disabled)?;
                if keys
                    .as_ref()
                    .is_some_and(|(old, _)| old.as_str() != stored_keys)
                {
                    return Ok(false);
                }
                let new_keys = keys.as_ref().map(|(_, new)| new);
                run(conn, &sql::update(&ep, new_keys))
                    .map_err(conflict(taken::endpoint_uid(ep.uid.as_deref())))?;
                insert_events(conn, &events)?;
                if was_disabled != ep.disabled {
                    insert_events(conn, &on_toggle)?;
                }
                Ok(true)
            })
            .await
    }

    async fn delete_with_events(
        &self,
        endpoint: &Endpoint,
        events: &[Message],
    ) -> Result<(), StoreError> {
        let (id, events) = (endpoint.id.clone(), events.to_vec());
        self.db
            .write(move |conn| {
                touched(run(conn, &sql::delete(&id))? as u64, "endpoint")?;
                insert_events(conn, &events)
            })
            .await
    }
}

/// Fails with not found unless the endpoint exists (after a conditional write touched nothing).
pub(super) fn require_endpoint(conn: &Connection, id: &EndpointId) -> Result<(), StoreError> {
    let exists = fetch_one(conn, &sql::exists(id), |row| row.bool(0))?;
    touched(u64::from(exists == Some(true)), "endpoint")
}
