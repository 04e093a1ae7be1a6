//! [`AuthStore`] on SQLite: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::Timestamp;

use super::rows::{self, fetch_one, page, run};
use super::{SqliteStore, refused};
use crate::error::{taken, touched};
use crate::sql::{Dialect, auth as sql};
use crate::{ApiToken, AuthStore, Page, PageRequest, StoreError, StoredResponse};

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        let token = token.clone();
        self.db
            .write(move |conn| {
                run(conn, &sql::insert_token(&token))
                    .map_err(refused(taken::token(), "application"))?;
                Ok(())
            })
            .await
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let hash = token_hash.to_owned();
        self.db
            .read(move |conn| fetch_one(conn, &sql::find_token(&hash), rows::token))
            .await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        let found = self
            .db
            .read(|conn| fetch_one(conn, &sql::has_admin_token(), |row| row.bool(0)))
            .await?;
        Ok(found.unwrap_or(false))
    }

    async fn list_tokens(&self, page_of: &PageRequest) -> Result<Page<ApiToken>, StoreError> {
        let page_of = page_of.clone();
        self.db
            .read(move |conn| {
                let query = sql::list_tokens(Dialect::Sqlite).page("id", false, &page_of);
                page(conn, query, rows::token)
            })
            .await
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.db
            .write(move |conn| touched(run(conn, &sql::revoke_token(&id, at))? as u64, "token"))
            .await
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let key = key.to_owned();
        self.db
            .read(move |conn| fetch_one(conn, &sql::get_response(&key, now), rows::stored_response))
            .await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        let (key, response) = (key.to_owned(), response.clone());
        self.db
            .write(move |conn| {
                run(conn, &sql::put_response(&key, &response, now, expires_at))?;
                Ok(())
            })
            .await
    }
}
