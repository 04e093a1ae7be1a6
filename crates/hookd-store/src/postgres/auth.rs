//! [`AuthStore`] on PostgreSQL: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::Timestamp;

use super::rows::{self, fetch_one, page, run};
use super::{PgStore, refused};
use crate::error::{taken, touched};
use crate::sql::{Dialect, auth as sql};
use crate::{ApiToken, AuthStore, Page, PageRequest, StoreError, StoredResponse};

#[async_trait]
impl AuthStore for PgStore {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        run(&self.pool, sql::insert_token(token))
            .await
            .map_err(refused(taken::token(), "application"))?;
        Ok(())
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        fetch_one(&self.pool, sql::find_token(token_hash), rows::token).await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        let found = fetch_one(&self.pool, sql::has_admin_token(), |row| row.bool(0)).await?;
        Ok(found.unwrap_or(false))
    }

    async fn list_tokens(&self, page_of: &PageRequest) -> Result<Page<ApiToken>, StoreError> {
        let query = sql::list_tokens(Dialect::Postgres).page("id", false, page_of);
        page(&self.pool, query, rows::token).await
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError> {
        touched(run(&self.pool, sql::revoke_token(id, at)).await?, "token")
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let statement = sql::get_response(key, now);
        fetch_one(&self.pool, statement, rows::stored_response).await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        run(
            &self.pool,
            sql::put_response(key, response, now, expires_at),
        )
        .await?;
        Ok(())
    }
}
