//! [`ApplicationStore`] on PostgreSQL: applications.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;

use super::rows::{self, fetch_one, page, run};
use super::{PgStore, conflict};
use crate::error::{taken, touched};
use crate::sql::{Dialect, applications as sql};
use crate::{ApplicationStore, Page, PageRequest, StoreError};

#[async_trait]
impl ApplicationStore for PgStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        run(&self.pool, sql::insert(app))
            .await
            .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        Ok(())
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        fetch_one(&self.pool, sql::get(id_or_uid), rows::app).await
    }

    async fn list_apps(&self, page_of: &PageRequest) -> Result<Page<Application>, StoreError> {
        let query = sql::list(Dialect::Postgres).page("id", false, page_of);
        page(&self.pool, query, rows::app).await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let rows = run(&self.pool, sql::update(app))
            .await
            .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
        touched(rows, "application")
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        touched(run(&self.pool, sql::delete(id)).await?, "application")
    }
}
