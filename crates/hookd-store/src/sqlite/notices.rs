//! [`NoticeStore`] on SQLite: the turn and the progress are writes of the one writer; the
//! events are a read.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};

use super::SqliteStore;
use super::rows::{self, fetch, fetch_one, run, text};
use crate::sql::notices as sql;
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
        let (owner, start) = (owner.to_owned(), start.clone());
        self.db
            .write(move |conn| {
                let turn = sql::take_turn(&owner, now, until, &start);
                let done = fetch_one(conn, &turn, |row| text(row, 0))?;
                Ok(done.map(MessageId::from_stored))
            })
            .await
    }

    async fn notices_done(&self, owner: &str, done: &MessageId) -> Result<bool, StoreError> {
        let (owner, done) = (owner.to_owned(), done.clone());
        self.db
            .write(move |conn| Ok(run(conn, &sql::done(&owner, &done))? == 1))
            .await
    }

    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let after = after.clone();
        self.db
            .read(move |conn| fetch(conn, &sql::events(&after, limit), rows::message))
            .await
    }
}
