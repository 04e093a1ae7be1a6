//! [`NoticeStore`] on PostgreSQL: the turn is one conditional update, so of several processes
//! exactly one holds it at a time.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::operations::APP_UID;
use hookd_core::{MessageId, Timestamp};

use super::{PgStore, rows, sql as query};
use crate::store::notice_sql as sql;
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
        let turn = sql::take_turn(["$1", "$2", "$3", "$4"]);
        let done: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(turn))
            .bind(owner)
            .bind(until.as_millis())
            .bind(now.as_millis())
            .bind(start.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(done.map(MessageId::from_stored))
    }

    async fn notices_done(&self, owner: &str, done: &MessageId) -> Result<bool, StoreError> {
        let updated = query(sql::done(["$1", "$2"]))
            .bind(owner)
            .bind(done.as_str())
            .execute(&self.pool)
            .await?;
        Ok(updated.rows_affected() == 1)
    }

    async fn operational_events(
        &self,
        after: &MessageId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let rows = query(sql::events(["$1", "$2", "$3"]))
            .bind(APP_UID)
            .bind(after.as_str())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::message).collect()
    }
}
