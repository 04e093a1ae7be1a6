//! [`EndpointStore`] on SQLite: endpoints.

use async_trait::async_trait;
use hookd_core::model::{Endpoint, Message, SealedKeys};
use hookd_core::{AppId, EndpointId, Timestamp};
use rusqlite::Connection;

use super::messages::insert_events;
use super::rows::{self, fetch, fetch_one, page, run};
use super::{SqliteStore, conflict, refused};
use crate::error::{taken, touched};
use crate::sql::{Dialect, endpoints as sql};
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
                run(conn, &sql::insert(&ep)).map_err(refused(
                    taken::endpoint_uid(ep.uid.as_deref()),
                    "application",
                ))?;
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
            .read(move |conn| fetch_one(conn, &sql::get(&app, &key), rows::endpoint))
            .await
    }

    async fn list_endpoints(
        &self,
        app: &AppId,
        page_of: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError> {
        let (app, page_of) = (app.clone(), page_of.clone());
        self.db
            .read(move |conn| {
                let query = sql::list(Dialect::Sqlite, &app).page("e.id", false, &page_of);
                page(conn, query, rows::endpoint)
            })
            .await
    }

    async fn update_endpoint_with(&self, update: &EndpointUpdate<'_>) -> Result<bool, StoreError> {
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
                let swapped = run(conn, &sql::replace_keys(&id, &old, &new, at))?;
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
        let after = after.cloned();
        self.db
            .read(move |conn| {
                let statement = sql::list_sealed_keys(after.as_ref(), limit);
                fetch(conn, &statement, sql::sealed_keys)
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
