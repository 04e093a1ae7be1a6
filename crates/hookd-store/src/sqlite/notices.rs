//! [`NoticeStore`] on SQLite: the turn and the progress are writes of the one writer; the
//! events are a read.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::operations::APP_UID;
use hookd_core::{MessageId, Timestamp};
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::rows::{self, collect};
use crate::store::notice_sql as sql;
use crate::{NoticeStore, StoreError};

#[async_trait]
impl NoticeStore for SqliteStore {
    async fn notice_turn(
        &self,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
        start: &MessageId,
    ) -> Result<Option<MessageId>, StoreError> {
        let (owner, start) = (owner.to_owned(), start.to_string());
        self.db
            .write(move |conn| {
                let turn = params![owner, until.as_millis(), now.as_millis(), start];
                let done: Option<String> = conn
                    .prepare_cached(&sql::take_turn(["?1", "?2", "?3", "?4"]))?
                    .query_row(turn, |row| row.get(0))
                    .optional()?;
                Ok(done.map(MessageId::from_stored))
            })
            .await
    }

    async fn notices_done(&self, owner: &str, done: &MessageId) -> Result<bool, StoreError> {
        let (owner, done) = (owner.to_owned(), done.to_string());
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(&sql::done(["?1", "?2"]))?
                    .execute([&owner, &done])?;
                Ok(rows == 1)
            })
            .await
    }

    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let after = after.to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .read(move |conn| {
                collect(
                    conn,
                    &sql::events(["?1", "?2", "?3"]),
                    params![APP_UID, after, limit],
                    rows::message,
                )
            })
            .await
    }
}
