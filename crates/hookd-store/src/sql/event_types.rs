//! [`EventTypeStore`] on both databases: every call is one shared statement.

use async_trait::async_trait;
use hookd_core::model::EventType;

use super::{Arg, Database, Dialect, ListQuery, Refusals, Statement, args, rows, sql};
use crate::columns::EVENT_TYPE_COLUMNS;
use crate::error::{taken, touched};
use crate::json::encode_opt;
use crate::{EventTypeStore, Page, PageRequest, StoreError};

#[async_trait]
impl<D: Database> EventTypeStore for D {
    async fn create_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        let refusals = Refusals::taken(taken::event_type(&et.name));
        self.write(insert(et), Some(refusals)).await?;
        Ok(())
    }

    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError> {
        self.read_one(get(name), rows::event_type).await
    }

    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError> {
        let query = list(D::DIALECT, include_archived).page("name", false, page);
        self.read_page(query, rows::event_type).await
    }

    async fn update_event_type(&self, et: &EventType) -> Result<(), StoreError> {
        touched(self.write(update(et), None).await?, "event type")
    }

    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError> {
        touched(self.write(delete(name), None).await?, "event type")
    }
}

/// The event type's name, then the fields an update writes too, as `?1` to `?10`.
fn name_and_fields(et: &EventType) -> Vec<Arg<'_>> {
    args![
        et.name.as_str(),
        et.description.as_str(),
        encode_opt(et.schemas.as_ref()),
        et.archived,
        et.deprecated,
        et.feature_flag.as_deref(),
        et.updated_at,
        et.group_name.as_deref(),
        encode_opt(et.feature_flags.as_ref()),
        et.envelope,
    ]
}

pub fn insert(et: &EventType) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO event_types (name, description, schemas, archived, deprecated,
         feature_flag, updated_at, group_name, feature_flags, envelope, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    );
    let mut args = name_and_fields(et);
    args.extend(args![et.created_at]);
    Statement::new(sql, args)
}

pub fn get(name: &str) -> Statement<'_> {
    let sql = sql!(
        "SELECT ",
        EVENT_TYPE_COLUMNS,
        " FROM event_types WHERE name = ?1"
    );
    Statement::new(sql, args![name])
}

pub fn list(dialect: Dialect, include_archived: bool) -> ListQuery<'static> {
    let select = sql!(
        "SELECT ",
        EVENT_TYPE_COLUMNS,
        " FROM event_types WHERE (?1 OR NOT archived)"
    );
    ListQuery::new(dialect, select, args![include_archived])
}

pub fn update(et: &EventType) -> Statement<'_> {
    let sql = sql!(
        "UPDATE event_types SET description = ?2, schemas = ?3, archived = ?4,
         deprecated = ?5, feature_flag = ?6, updated_at = ?7, group_name = ?8,
         feature_flags = ?9, envelope = ?10 WHERE name = ?1"
    );
    Statement::new(sql, name_and_fields(et))
}

pub fn delete(name: &str) -> Statement<'_> {
    Statement::new(sql!("DELETE FROM event_types WHERE name = ?1"), args![name])
}
