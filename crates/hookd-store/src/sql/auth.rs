//! [`AuthStore`] on both databases: every call is one shared statement.

use async_trait::async_trait;
use hookd_core::{AppId, EndpointId, Timestamp};

use super::{Database, Dialect, ListQuery, Refusals, Statement, args, rows, sql};
use crate::columns::TOKEN_COLUMNS;
use crate::error::{taken, touched};
use crate::{ApiToken, AuthStore, Page, PageRequest, StoreError, StoredResponse};

#[async_trait]
impl<D: Database> AuthStore for D {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        let refusals = Refusals {
            taken: taken::token(),
            parent: "application",
        };
        self.write(insert_token(token), Some(refusals)).await?;
        Ok(())
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        self.read_one(find_token(token_hash), rows::token).await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        let found = self.read_one(has_admin_token(), |row| row.bool(0)).await?;
        Ok(found.unwrap_or(false))
    }

    async fn list_tokens(&self, page: &PageRequest) -> Result<Page<ApiToken>, StoreError> {
        let query = list_tokens(D::DIALECT).page("id", false, page);
        self.read_page(query, rows::token).await
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError> {
        touched(self.write(revoke_token(id, at), None).await?, "token")
    }

    async fn expire_poller_tokens(
        &self,
        endpoint: &EndpointId,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = sql!(
            "UPDATE api_tokens SET expires_at = ?2
             WHERE endpoint_id = ?1 AND revoked_at IS NULL
               AND (expires_at IS NULL OR expires_at > ?2)"
        );
        let statement = Statement::new(sql, args![endpoint.as_str(), at]);
        self.write(statement, None).await.map(drop)
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        self.read_one(get_response(key, now), rows::stored_response)
            .await
    }

    async fn put_idempotent_response(
        &self,
        key: &str,
        response: &StoredResponse,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        let statement = put_response(key, response, now, expires_at);
        self.write(statement, None).await?;
        Ok(())
    }
}

pub fn insert_token(token: &ApiToken) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at, name,
         revoked_at, rate_limit, read_only, endpoint_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    );
    Statement::new(
        sql,
        args![
            token.id.as_str(),
            token.token_hash.as_str(),
            token.app_id.as_ref().map(AppId::as_str),
            token.created_at,
            token.expires_at,
            token.name.as_str(),
            token.revoked_at,
            token.rate_limit,
            token.read_only,
            token.endpoint_id.as_ref().map(EndpointId::as_str),
        ],
    )
}

pub fn find_token(token_hash: &str) -> Statement<'_> {
    let sql = sql!(
        "SELECT ",
        TOKEN_COLUMNS,
        " FROM api_tokens WHERE token_hash = ?1"
    );
    Statement::new(sql, args![token_hash])
}

/// Whether an unrevoked admin (not app-scoped) token exists: one boolean.
pub fn has_admin_token() -> Statement<'static> {
    let sql = sql!(
        "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL AND revoked_at IS NULL)"
    );
    Statement::new(sql, args![])
}

pub fn list_tokens(dialect: Dialect) -> ListQuery<'static> {
    let select = sql!("SELECT ", TOKEN_COLUMNS, " FROM api_tokens WHERE TRUE");
    ListQuery::new(dialect, select, args![])
}

pub fn revoke_token(id: &str, at: Timestamp) -> Statement<'_> {
    let sql = sql!("UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1");
    Statement::new(sql, args![id, at])
}

/// The response kept under `key` that has not expired by `now`: `status, body`.
pub fn get_response(key: &str, now: Timestamp) -> Statement<'_> {
    let sql =
        sql!("SELECT status, body FROM idempotent_responses WHERE key = ?1 AND expires_at > ?2");
    Statement::new(sql, args![key, now])
}

/// Keeps `response` under `key`: an expired entry under the same key gives way; a live one
/// wins.
pub fn put_response<'a>(
    key: &'a str,
    response: &'a StoredResponse,
    now: Timestamp,
    expires_at: Timestamp,
) -> Statement<'a> {
    let sql = sql!(
        "INSERT INTO idempotent_responses (key, status, body, expires_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body,
         expires_at = excluded.expires_at WHERE idempotent_responses.expires_at <= ?5"
    );
    Statement::new(
        sql,
        args![
            key,
            response.status,
            response.body.as_slice(),
            expires_at,
            now
        ],
    )
}
