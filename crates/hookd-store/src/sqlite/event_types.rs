//! [`EventTypeStore`] on SQLite: the event-type catalog.

use async_trait::async_trait;
use hookd_core::model::EventType;
use rusqlite::params;
use rusqlite::types::Value;

use super::rows::{self, EVENT_TYPE_COLUMNS, collect};
use super::{ListQuery, SqliteStore, conflict};
use crate::error::{taken, touched};
use crate::json::encode_opt;
use crate::{EventTypeStore, Page, PageRequest, StoreError};

#[async_trait]
impl EventTypeStore for SqliteStore {
    async fn create_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO event_types (name, description, schemas, archived, deprecated,
                     feature_flag, created_at, updated_at, group_name, feature_flags)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )?
                .execute(params![
                    et.name,
                    et.description,
                    encode_opt(et.schemas.as_ref()),
                    et.archived,
                    et.deprecated,
                    et.feature_flag,
                    et.created_at.as_millis(),
                    et.updated_at.as_millis(),
                    et.group_name,
                    encode_opt(et.feature_flags.as_ref()),
                ])
                .map_err(conflict(taken::event_type(&et.name)))?;
                Ok(())
            })
            .await
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        let name = name.to_owned();
        self.db
            .read(move |conn| {
                let sql = format!("SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE name = ?1");
                Ok(collect(conn, &sql, [name], rows::event_type)?.pop())
            })
            .await
    }

    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let page = page.clone();
        self.db
            .read(move |conn| {
                let select = format!(
                    "SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE (?1 OR archived = 0)"
                );
                ListQuery::new(&select, vec![Value::Integer(include_archived.into())]).page(
                    conn,
                    "name",
                    false,
                    &page,
                    rows::event_type,
                )
            })
            .await
    }

    async fn update_event_type(&self, event_type: &EventType) -> Result<(), StoreError> {
        let et = event_type.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE event_types SET description = ?2, schemas = ?3, archived = ?4,
                         deprecated = ?5, feature_flag = ?6, updated_at = ?7, group_name = ?8,
                         feature_flags = ?9 WHERE name = ?1",
                    )?
                    .execute(params![
                        et.name,
                        et.description,
                        encode_opt(et.schemas.as_ref()),
                        et.archived,
                        et.deprecated,
                        et.feature_flag,
                        et.updated_at.as_millis(),
                        et.group_name,
                        encode_opt(et.feature_flags.as_ref()),
                    ])?;
                touched(rows as u64, "event type")
            })
            .await
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM event_types WHERE name = ?1", [&name])?;
                touched(rows as u64, "event type")
            })
            .await
    }
}
