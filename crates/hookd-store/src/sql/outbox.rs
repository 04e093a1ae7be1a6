//! The statements both outbox relays share (see [`crate::OutboxStore`]).

use hookd_core::MessageId;

use super::applications::ID_OR_UID;
use super::rows::{Columns, Decoded};
use super::{Statement, args, sql};
use crate::OutboxRow;

/// Whether a source's row was published already: one boolean.
pub fn relayed<'a>(source: &'a str, row_id: i64) -> Statement<'a> {
    let sql =
        sql!("SELECT EXISTS (SELECT 1 FROM outbox_relayed WHERE source = ?1 AND row_id = ?2)");
    Statement::new(sql, args![source, row_id])
}

/// Records that a source's row became `message`; a record already there stays, and the
/// statement changes no row.
pub fn record_relayed<'a>(source: &'a str, row_id: i64, message: &'a MessageId) -> Statement<'a> {
    let sql = sql!(
        "INSERT INTO outbox_relayed (source, row_id, message_id) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING"
    );
    Statement::new(sql, args![source, row_id, message.as_str()])
}

/// The id of the application a row names by id or uid (the id wins, as in the API), and
/// whether it or the row's event type asks for the Standard Webhooks envelope: see
/// [`app_of_row_row`].
pub fn app_of_row(row: &OutboxRow) -> Statement<'_> {
    let sql = sql!(
        "SELECT id, envelope OR EXISTS
            (SELECT 1 FROM event_types t WHERE t.name = ?2 AND t.envelope)",
        ID_OR_UID
    );
    Statement::new(sql, args![row.app.as_str(), row.event_type.as_str()])
}

/// A row of [`app_of_row`]: the application's id, and whether the message is enveloped.
pub fn app_of_row_row(row: &dyn Columns) -> Decoded<(String, bool)> {
    Ok((super::rows::text(row, 0)?, row.bool(1)?))
}

/// Whether the event type a row names is archived, and its schemas.
pub fn event_type(name: &str) -> Statement<'_> {
    let sql = sql!("SELECT archived, schemas FROM event_types WHERE name = ?1");
    Statement::new(sql, args![name])
}

/// A row of [`event_type`].
pub fn event_type_row(row: &dyn Columns) -> Decoded<(bool, Option<String>)> {
    Ok((row.bool(0)?, row.opt_text(1)?))
}
