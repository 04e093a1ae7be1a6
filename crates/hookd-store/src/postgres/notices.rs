//! [`NoticeStore`] on PostgreSQL: the turn is one conditional update, so of several processes
//! exactly one holds it at a time.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{MessageId, Timestamp};

use super::PgStore;
use super::rows::{self, fetch, fetch_one, run, text};
use crate::sql::notices as sql;
use crate::{NoticeStore, StoreError};

#[async_trait]
impl NoticeStore for PgStore {
    async fn notice_turn(
        &self,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
        start: &MessageId,
    ) -> Result<Option<MessageId>, StoreError> {
        let turn = sql::take_turn(owner, now, until, start);
        let done = fetch_one(&self.pool, turn, |row| text(row, 0)).await?;
        Ok(done.map(MessageId::from_stored))
    }

    async fn notices_done(&self, owner: &str, done: &MessageId) -> Result<bool, StoreError> {
        Ok(run(&self.pool, sql::done(owner, done)).await? == 1)
    }

    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        fetch(&self.pool, sql::events(after, limit), rows::message).await
    }
}
