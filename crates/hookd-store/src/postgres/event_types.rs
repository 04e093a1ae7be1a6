//! [`EventTypeStore`] on PostgreSQL: the event-type catalog.

use async_trait::async_trait;
use hookd_core::model::EventType;

use super::rows;
use super::{ListQuery, Param, PgStore, conflict, fetch_one_of, sql};
use crate::columns::EVENT_TYPE_COLUMNS;
use crate::error::{taken, touched};
use crate::json::encode_opt;
use crate::{EventTypeStore, Page, PageRequest, StoreError};

#[async_trait]
impl EventTypeStore for PgStore {
    async fn create_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO event_types (name, description, schemas, archived, deprecated,
             feature_flag, created_at, updated_at, group_name, feature_flags)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&et.name)
        .bind(&et.description)
        .bind(encode_opt(et.schemas.as_ref()))
        .bind(et.archived)
        .bind(et.deprecated)
        .bind(et.feature_flag.as_deref())
        .bind(et.created_at.as_millis())
        .bind(et.updated_at.as_millis())
        .bind(et.group_name.as_deref())
        .bind(encode_opt(et.feature_flags.as_ref()))
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
             deprecated = $5, feature_flag = $6, updated_at = $7, group_name = $8,
             feature_flags = $9 WHERE name = $1",
        )
        .bind(&et.name)
        .bind(&et.description)
        .bind(encode_opt(et.schemas.as_ref()))
        .bind(et.archived)
        .bind(et.deprecated)
        .bind(et.feature_flag.as_deref())
        .bind(et.updated_at.as_millis())
        .bind(et.group_name.as_deref())
        .bind(encode_opt(et.feature_flags.as_ref()))
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
}
