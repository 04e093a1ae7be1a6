//! The statements of [`crate::ApplicationStore`].

use hookd_core::AppId;
use hookd_core::model::Application;

use super::{Arg, Dialect, ListQuery, Statement, args, sql};
use crate::columns::APP_COLUMNS;
use crate::json::encode;

/// The application's id, then the fields an update writes too, as `?1` to `?6`.
fn id_and_fields(app: &Application) -> Vec<Arg<'_>> {
    args![
        app.id.as_str(),
        app.uid.as_deref(),
        app.name.as_str(),
        encode(&app.metadata),
        app.throttle_rate,
        app.updated_at,
    ]
}

pub fn insert(app: &Application) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO applications (id, uid, name, metadata, throttle_rate, updated_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    );
    let mut args = id_and_fields(app);
    args.extend(args![app.created_at]);
    Statement::new(sql, args)
}

/// The application whose id or uid is `?1`: should one application's uid equal another's
/// id, the id wins.
pub const ID_OR_UID: &str =
    " FROM applications WHERE id = ?1 OR uid = ?1 ORDER BY id = ?1 DESC LIMIT 1";

/// The application whose id or uid is `id_or_uid` (see [`ID_OR_UID`]).
pub fn get(id_or_uid: &str) -> Statement<'_> {
    Statement::new(sql!("SELECT ", APP_COLUMNS, ID_OR_UID), args![id_or_uid])
}

pub fn list(dialect: Dialect) -> ListQuery<'static> {
    let select = sql!("SELECT ", APP_COLUMNS, " FROM applications WHERE TRUE");
    ListQuery::new(dialect, select, args![])
}

pub fn update(app: &Application) -> Statement<'_> {
    let sql = sql!(
        "UPDATE applications SET uid = ?2, name = ?3, metadata = ?4, throttle_rate = ?5,
         updated_at = ?6 WHERE id = ?1"
    );
    Statement::new(sql, id_and_fields(app))
}

pub fn delete(id: &AppId) -> Statement<'_> {
    Statement::new(
        sql!("DELETE FROM applications WHERE id = ?1"),
        args![id.as_str()],
    )
}
