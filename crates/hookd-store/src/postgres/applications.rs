//! [`ApplicationStore`] on PostgreSQL: applications.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection};
use sqlx::query::Query;

use super::rows;
use super::{ListQuery, PgStore, conflict, fetch_one_of, sql};
use crate::columns::APP_COLUMNS;
use crate::error::{taken, touched};
use crate::json::encode;
use crate::{ApplicationStore, Page, PageRequest, StoreError};

#[async_trait]
impl ApplicationStore for PgStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        insert(app, "")
            .execute(&self.pool)
            .await
            .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        Ok(())
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        // Should one application's uid equal another's id, the id wins.
        let query = sql(format!(
            "SELECT {APP_COLUMNS} FROM applications WHERE id = $1 OR uid = $1
             ORDER BY id = $1 DESC LIMIT 1"
        ))
        .bind(id_or_uid);
        fetch_one_of(query, &self.pool, rows::app).await
    }

    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError> {
        let select = format!("SELECT {APP_COLUMNS} FROM applications WHERE TRUE");
        ListQuery::new(&select, vec![])
            .page(&self.pool, "id", false, page, rows::app)
            .await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE applications SET uid = $2, name = $3, metadata = $4, throttle_rate = $5,
             updated_at = $6 WHERE id = $1",
        )
        .bind(app.id.as_str())
        .bind(app.uid.as_deref())
        .bind(&app.name)
        .bind(encode(&app.metadata))
        .bind(app.throttle_rate.map(i64::from))
        .bind(app.updated_at.as_millis())
        .execute(&self.pool)
        .await
        .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        touched(done.rows_affected(), "application")
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM applications WHERE id = $1")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        touched(done.rows_affected(), "application")
    }
}

/// Inserts `app`'s row, the statement ending in `on_conflict` (a clause, or nothing).
fn insert(app: &Application, on_conflict: &str) -> Query<'static, Postgres, PgArguments> {
    sql(format!(
        "INSERT INTO applications (id, uid, name, metadata, throttle_rate, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) {on_conflict}"
    ))
    .bind(app.id.as_str().to_owned())
    .bind(app.uid.clone())
    .bind(app.name.clone())
    .bind(encode(&app.metadata))
    .bind(app.throttle_rate.map(i64::from))
    .bind(app.created_at.as_millis())
    .bind(app.updated_at.as_millis())
}

/// The id of the application whose uid is `app`'s, made from `app` in the caller's transaction
/// when there is none (`app` itself when it has no uid). A transaction making the same uid
/// meanwhile is waited for: committed, its application is the one found.
pub(super) async fn get_or_create(
    conn: &mut PgConnection,
    app: &Application,
) -> Result<AppId, StoreError> {
    insert(app, "ON CONFLICT (uid) DO NOTHING")
        .execute(&mut *conn)
        .await?;
    let id: String = sqlx::query_scalar("SELECT id FROM applications WHERE uid = $1 OR id = $2")
        .bind(app.uid.as_deref())
        .bind(app.id.as_str())
        .fetch_one(&mut *conn)
        .await?;
    Ok(AppId::from_stored(id))
}
