//! [`PollerStore`] on both databases: a poll is the message list's query in ascending id
//! order below a cut, and a consumer's position one upserted row.

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{EndpointId, Timestamp};

use super::rows::{self, text};
use super::{Database, Statement, args, sql};
use crate::{Cursor, Page, PageRequest, PollRequest, PollerStore, StoreError};

#[async_trait]
impl<D: Database> PollerStore for D {
    async fn poll_messages(&self, request: &PollRequest<'_>) -> Result<Page<Message>, StoreError> {
        let mut query = super::messages::list(D::DIALECT, request.app, request.filter);
        query.and("m.id < ?", request.cut().to_string());
        let page = PageRequest {
            limit: request.limit,
            cursor: Some(Cursor::After(request.after.to_owned())),
        };
        self.read_page(query.page("m.id", false, &page), rows::message)
            .await
    }

    async fn consumer_position(
        &self,
        endpoint: &EndpointId,
        consumer: &str,
    ) -> Result<Option<String>, StoreError> {
        let sql = sql!(
            "SELECT position FROM poller_consumers WHERE endpoint_id = ?1 AND consumer_id = ?2"
        );
        let statement = Statement::new(sql, args![endpoint.as_str(), consumer]);
        self.read_one(statement, |row| text(row, 0)).await
    }

    async fn set_consumer_position(
        &self,
        endpoint: &EndpointId,
        consumer: &str,
        position: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = sql!(
            "INSERT INTO poller_consumers (endpoint_id, consumer_id, position, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (endpoint_id, consumer_id)
             DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at"
        );
        let statement = Statement::new(sql, args![endpoint.as_str(), consumer, position, at]);
        self.write(statement, None).await.map(drop)
    }
}
