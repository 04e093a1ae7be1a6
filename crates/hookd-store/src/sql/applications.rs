//! [`ApplicationStore`] on both databases: every call is one shared statement.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;

use super::{Arg, Database, Dialect, ListQuery, Refusals, Statement, args, rows, sql};
use crate::columns::APP_COLUMNS;
use crate::error::{taken, touched};
use crate::json::encode;
use crate::{ApplicationStore, Page, PageRequest, StoreError};

#[async_trait]
impl<D: Database> ApplicationStore for D {
    async fn create_app(&self, app: &Application) -> Result<(), StoreError> {
        let refusals = Refusals::taken(taken::app_uid(app.uid.as_deref()));
        self.write(insert(app), Some(refusals)).await?;
        Ok(())
    }

    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError> {
        self.read_one(get(id_or_uid), rows::app).await
    }

    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError> {
        let query = list(D::DIALECT).page("id", false, page);
        self.read_page(query, rows::app).await
    }

    async fn update_app(&self, app: &Application) -> Result<(), StoreError> {
        let refusals = Refusals::taken(taken::app_uid(app.uid.as_deref()));
        touched(
            self.write(update(app), Some(refusals)).await?,
            "application",
        )
    }

    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError> {
        touched(self.write(delete(id), None).await?, "application")
    }
}

/// The application's id, then the fields an update writes too, as `?1` to `?7`.
fn id_and_fields(app: &Application) -> Vec<Arg<'_>> {
    args![
        app.id.as_str(),
        app.uid.as_deref(),
        app.name.as_str(),
        encode(&app.metadata),
        app.throttle_rate,
        app.updated_at,
        app.envelope,
    ]
}

/// An application's row, `?1` to `?8`.
const INSERT: &str = "INSERT INTO applications
     (id, uid, name, metadata, throttle_rate, updated_at, envelope, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// The arguments of [`INSERT`].
fn insert_args(app: &Application) -> Vec<Arg<'_>> {
    let mut args = id_and_fields(app);
    args.extend(args![app.created_at]);
    args
}

pub fn insert(app: &Application) -> Statement<'_> {
    Statement::new(sql!(INSERT), insert_args(app))
}

/// [`insert`], unless an application has `app`'s uid: a publish's inline application, made
/// when missing.
pub fn insert_unless_uid_taken(app: &Application) -> Statement<'_> {
    Statement::new(
        sql!(INSERT, " ON CONFLICT (uid) DO NOTHING"),
        insert_args(app),
    )
}

/// The id of the application with `app`'s uid (`app`'s own id when it has none).
pub fn id_of_uid(app: &Application) -> Statement<'_> {
    Statement::new(
        sql!("SELECT id FROM applications WHERE uid = ?1 OR id = ?2"),
        args![app.uid.as_deref(), app.id.as_str()],
    )
}

/// Decodes [`id_of_uid`]'s row.
pub fn app_id(row: &dyn rows::Columns) -> rows::Decoded<AppId> {
    Ok(AppId::from_stored(rows::text(row, 0)?))
}

/// The application whose id or uid is `?1`: should one application's uid equal another's
/// id, the id wins.
pub const ID_OR_UID: &str =
    " FROM applications WHERE id = ?1 OR uid = ?1 ORDER BY id = ?1 DESC LIMIT 1";

/// The application whose id or uid is `id_or_uid` (see [`ID_OR_UID`]).
pub fn get(id_or_uid: &str) -> Statement<'_> {
    Statement::new(sql!("SELECT ", APP_COLUMNS, ID_OR_UID), args![id_or_uid])
}

/// Every application but those ingest sources own (uid `hookd-ingest-…`, see
/// [`crate::store::ingest::INTERNAL_APP_PREFIX`]): they are reached through their source.
pub fn list(dialect: Dialect) -> ListQuery<'static> {
    let select = sql!(
        "SELECT ",
        APP_COLUMNS,
        " FROM applications WHERE (uid IS NULL OR uid NOT LIKE 'hookd-ingest-%')"
    );
    ListQuery::new(dialect, select, args![])
}

pub fn update(app: &Application) -> Statement<'_> {
    let sql = sql!(
        "UPDATE applications SET uid = ?2, name = ?3, metadata = ?4, throttle_rate = ?5,
         updated_at = ?6, envelope = ?7 WHERE id = ?1"
    );
    Statement::new(sql, id_and_fields(app))
}

pub fn delete(id: &AppId) -> Statement<'_> {
    Statement::new(
        sql!("DELETE FROM applications WHERE id = ?1"),
        args![id.as_str()],
    )
}
