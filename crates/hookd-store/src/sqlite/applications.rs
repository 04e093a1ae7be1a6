//! [`ApplicationStore`] on SQLite: applications.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;
use rusqlite::{Connection, params};

use super::rows::{self, APP_COLUMNS, collect};
use super::{ListQuery, SqliteStore, conflict};
use crate::error::{taken, touched};
use crate::json::encode;
use crate::{ApplicationStore, Page, PageRequest, StoreError};

#[async_trait]
impl ApplicationStore for SqliteStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                insert(conn, &app, "").map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                Ok(())
            })
            .await
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        let key = id_or_uid.to_owned();
        self.db
            .read(move |conn| {
                // A uid may equal another application's id: the id wins, as on PostgreSQL.
                let sql = format!(
                    "SELECT {APP_COLUMNS} FROM applications WHERE id = ?1 OR uid = ?1
                     ORDER BY id = ?1 DESC LIMIT 1"
                );
                Ok(collect(conn, &sql, [key], rows::app)?.pop())
            })
            .await
    }

    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError> {
        let page = page.clone();
        self.db
            .read(move |conn| {
                let select = format!("SELECT {APP_COLUMNS} FROM applications WHERE 1 = 1");
                ListQuery::new(&select, vec![]).page(conn, "id", false, &page, rows::app)
            })
            .await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE applications SET uid = ?2, name = ?3, metadata = ?4, throttle_rate = ?5,
                         updated_at = ?6 WHERE id = ?1",
                    )?
                    .execute(params![
                        app.id.as_str(),
                        app.uid,
                        app.name,
                        encode(&app.metadata),
                        app.throttle_rate,
                        app.updated_at.as_millis(),
                    ])
                    .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                touched(rows as u64, "application")
            })
            .await
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        let id = id.clone();
        self.db
            .write(move |conn| {
                let rows = conn.execute("DELETE FROM applications WHERE id = ?1", [id.as_str()])?;
                touched(rows as u64, "application")
            })
            .await
    }
}

/// Inserts `app`'s row, the statement ending in `on_conflict` (a clause, or nothing).
fn insert(conn: &Connection, app: &Application, on_conflict: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(&format!(
        "INSERT INTO applications (id, uid, name, metadata, throttle_rate, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) {on_conflict}"
    ))?
    .execute(params![
        app.id.as_str(),
        app.uid,
        app.name,
        encode(&app.metadata),
        app.throttle_rate,
        app.created_at.as_millis(),
        app.updated_at.as_millis(),
    ])
}

/// The id of the application whose uid is `app`'s, made from `app` in the caller's write when
/// there is none (`app` itself when it has no uid).
pub(super) fn get_or_create(conn: &Connection, app: &Application) -> Result<AppId, StoreError> {
    insert(conn, app, "ON CONFLICT (uid) DO NOTHING")?;
    let id = conn
        .prepare_cached("SELECT id FROM applications WHERE uid = ?1 OR id = ?2")?
        .query_row(params![app.uid, app.id.as_str()], |row| row.get(0))?;
    Ok(AppId::from_stored(id))
}
