//! [`EventTypeStore`] on PostgreSQL: the event-type catalog.

use async_trait::async_trait;
use hookd_core::model::EventType;

use super::rows::{self, fetch_one, page, run};
use super::{PgStore, conflict};
use crate::error::{taken, touched};
use crate::sql::{Dialect, event_types as sql};
use crate::{EventTypeStore, Page, PageRequest, StoreError};

#[async_trait]
impl EventTypeStore for PgStore {
    async fn create_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        run(&self.pool, sql::insert(et))
            .await
            .map_err(conflict(taken::event_type(&et.name)))?;
        Ok(())
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        fetch_one(&self.pool, sql::get(name), rows::event_type).await
    }

    async fn list_event_types(
        &self,
        page_of: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let query = sql::list(Dialect::Postgres, include_archived).page("name", false, page_of);
        page(&self.pool, query, rows::event_type).await
    }

    async fn update_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        touched(run(&self.pool, sql::update(et)).await?, "event type")
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        touched(run(&self.pool, sql::delete(name)).await?, "event type")
    }
}
