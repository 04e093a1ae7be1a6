//! [`ApplicationStore`] on SQLite: applications.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;

use super::rows::{self, fetch_one, page, run};
use super::{SqliteStore, conflict};
use crate::error::{taken, touched};
use crate::sql::{Dialect, applications as sql};
use crate::{ApplicationStore, Page, PageRequest, StoreError};

#[async_trait]
impl ApplicationStore for SqliteStore {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                run(conn, &sql::insert(&app))
                    .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                Ok(())
            })
            .await
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        let key = id_or_uid.to_owned();
        self.db
            .read(move |conn| fetch_one(conn, &sql::get(&key), rows::app))
            .await
    }

    async fn list_apps(&self, page_of: &PageRequest) -> Result<Page<Application>, StoreError> {
        let page_of = page_of.clone();
        self.db
            .read(move |conn| {
                let query = sql::list(Dialect::Sqlite).page("id", false, &page_of);
                page(conn, query, rows::app)
            })
            .await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let app = app.clone();
        self.db
            .write(move |conn| {
                let rows = run(conn, &sql::update(&app))
                    .map_err(conflict(taken::app_uid(app.uid.as_deref())))?;
                touched(rows as u64, "application")
            })
            .await
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        let id = id.clone();
        self.db
            .write(move |conn| touched(run(conn, &sql::delete(&id))? as u64, "application"))
            .await
    }
}
