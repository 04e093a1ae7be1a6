//! [`AuthStore`] on PostgreSQL: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::{AppId, Timestamp};

use super::rows;
use super::{ListQuery, PgStore, fetch_one_of, refused, sql};
use crate::columns::TOKEN_COLUMNS;
use crate::error::{taken, touched};
use crate::{ApiToken, AuthStore, Page, PageRequest, StoreError, StoredResponse};

#[async_trait]
impl AuthStore for PgStore {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at, name,
             revoked_at, rate_limit, read_only) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&token.id)
        .bind(&token.token_hash)
        .bind(token.app_id.as_ref().map(AppId::as_str))
        .bind(token.created_at.as_millis())
        .bind(token.expires_at.map(Timestamp::as_millis))
        .bind(&token.name)
        .bind(token.revoked_at.map(Timestamp::as_millis))
        .bind(token.rate_limit.map(i64::from))
        .bind(token.read_only)
        .execute(&self.pool)
        .await
        .map_err(refused(taken::token(), "application"))?;
        Ok(())
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let query = sql(format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = $1"
        ))
        .bind(token_hash);
        fetch_one_of(query, &self.pool, rows::token).await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL AND revoked_at IS NULL)",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn list_tokens(&self, page: &PageRequest) -> Result<Page<ApiToken>, StoreError> {
        let select = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE TRUE");
        ListQuery::new(&select, vec![])
            .page(&self.pool, "id", false, page, rows::token)
            .await
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
        )
        .bind(id)
        .bind(at.as_millis())
        .execute(&self.pool)
        .await?;
        touched(done.rows_affected(), "token")
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let query = sqlx::query(
            "SELECT status, body FROM idempotent_responses WHERE key = $1 AND expires_at > $2",
        )
        .bind(key)
        .bind(now.as_millis());
        fetch_one_of(query, &self.pool, rows::stored_response).await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        // An expired entry under the same key gives way; a live one wins.
        sqlx::query(
            "INSERT INTO idempotent_responses (key, status, body, expires_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body,
             expires_at = excluded.expires_at WHERE idempotent_responses.expires_at <= $5",
        )
        .bind(key)
        .bind(i64::from(response.status))
        .bind(&response.body)
        .bind(expires_at.as_millis())
        .bind(now.as_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
