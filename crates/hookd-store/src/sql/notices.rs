//! [`NoticeStore`] on both databases: the turn is one conditional update, so of several
//! processes exactly one holds it at a time (on SQLite, the turn and the progress are writes of
//! the one writer; the events are a read).

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::operations::APP_UID;
use hookd_core::{MessageId, Timestamp};

use super::rows::{self, text};
use super::{Database, Statement, args, sql};
use crate::columns::MESSAGE_COLUMNS;
use crate::{NoticeStore, StoreError};

#[async_trait]
impl<D: Database> NoticeStore for D {
    async fn notice_turn(
        &self,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
        start: &MessageId,
    ) -> Result<Option<MessageId>, StoreError> {
        let turn = take_turn(owner, now, until, start);
        let done = self.write_returning(turn, |row| text(row, 0)).await?;
        Ok(done.map(MessageId::from_stored))
    }

    async fn notices_done(&self, owner: &str, done_up_to: &MessageId) -> Result<bool, StoreError> {
        Ok(self.write(done(owner, done_up_to), None).await? == 1)
    }

    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        self.read(events(after, limit), rows::message).await
    }
}

/// Gives `owner` the turn until `until` unless another holds it past `now`; the very first
/// turn starts after `start`. Returns the last event done (no row while another holds it).
pub fn take_turn<'a>(
    owner: &'a str,
    now: Timestamp,
    until: Timestamp,
    start: &'a MessageId,
) -> Statement<'a> {
    let sql = sql!(
        "UPDATE notice_cursor SET owner = ?1, turn_until = ?2,
             sent_up_to = COALESCE(sent_up_to, ?4)
         WHERE id = 1 AND (owner = ?1 OR owner IS NULL OR turn_until <= ?3)
         RETURNING sent_up_to"
    );
    Statement::new(sql, args![owner, until, now, start.as_str()])
}

/// Records that the events up to `done` are done, if `owner` still holds the turn.
pub fn done<'a>(owner: &'a str, done: &'a MessageId) -> Statement<'a> {
    let sql = sql!("UPDATE notice_cursor SET sent_up_to = ?2 WHERE id = 1 AND owner = ?1");
    Statement::new(sql, args![owner, done.as_str()])
}

/// The operations application's messages after `after`, oldest first.
pub fn events(after: &MessageId, limit: usize) -> Statement<'_> {
    let sql = sql!(
        "SELECT ",
        MESSAGE_COLUMNS,
        " FROM messages m
         WHERE m.app_id = (SELECT id FROM applications WHERE uid = ?1) AND m.id > ?2
         ORDER BY m.id LIMIT ?3"
    );
    Statement::new(sql, args![APP_UID, after.as_str(), limit])
}
