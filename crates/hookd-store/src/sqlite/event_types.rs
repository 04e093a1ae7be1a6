//! [`EventTypeStore`] on SQLite: the event-type catalog.

use async_trait::async_trait;
use hookd_core::model::EventType;

use super::rows::{self, fetch_one, page, run};
use super::{SqliteStore, conflict};
use crate::error::{taken, touched};
use crate::sql::{Dialect, event_types as sql};
use crate::{EventTypeStore, Page, PageRequest, StoreError};

#[async_trait]
impl EventTypeStore for SqliteStore {
    async fn create_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| {
                run(conn, &sql::insert(&et)).map_err(conflict(taken::event_type(&et.name)))?;
                Ok(())
            })
            .await
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        let name = name.to_owned();
        self.db
            .read(move |conn| fetch_one(conn, &sql::get(&name), rows::event_type))
            .await
    }

    async fn list_event_types(
        &self,
        page_of: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let page_of = page_of.clone();
        self.db
            .read(move |conn| {
                let query =
                    sql::list(Dialect::Sqlite, include_archived).page("name", false, &page_of);
                page(conn, query, rows::event_type)
            })
            .await
    }

    async fn update_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| touched(run(conn, &sql::update(&et))? as u64, "event type"))
            .await
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.db
            .write(move |conn| touched(run(conn, &sql::delete(&name))? as u64, "event type"))
            .await
    }
}
