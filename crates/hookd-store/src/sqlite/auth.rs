//! [`AuthStore`] on SQLite: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::{AppId, Timestamp};
use rusqlite::{OptionalExtension, params};

use super::rows::{self, TOKEN_COLUMNS};
use super::{ListQuery, SqliteStore, refused};
use crate::error::{taken, touched};
use crate::{ApiToken, AuthStore, Page, PageRequest, StoreError, StoredResponse};

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        let token = token.clone();
        self.db
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at, name,
                     revoked_at, rate_limit, read_only) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        token.id,
                        token.token_hash,
                        token.app_id.as_ref().map(AppId::as_str),
                        token.created_at.as_millis(),
                        token.expires_at.map(Timestamp::as_millis),
                        token.name,
                        token.revoked_at.map(Timestamp::as_millis),
                        token.rate_limit,
                        token.read_only,
                    ],
                )
                .map_err(refused(taken::token(), "application"))?;
                Ok(())
            })
            .await
    }

    async fn find_token(&self, token_hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let hash = token_hash.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?1"
                ))?
                .query_row([hash], |row| Ok(rows::token(row)))
                .optional()?
                .transpose()
            })
            .await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        self.db
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL AND revoked_at IS NULL)",
                    [],
                    |row| row.get(0),
                )?)
            })
            .await
    }

    async fn list_tokens(&self, page: &PageRequest) -> Result<Page<ApiToken>, StoreError> {
        let page = page.clone();
        self.db
            .read(move |conn| {
                let select = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE 1 = 1");
                ListQuery::new(&select, vec![]).page(conn, "id", false, &page, rows::token)
            })
            .await
    }

    async fn revoke_token(&self, id: &str, at: Timestamp) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.db
            .write(move |conn| {
                let rows = conn.execute(
                    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                    params![id, at.as_millis()],
                )?;
                touched(rows as u64, "token")
            })
            .await
    }

    async fn get_idempotent_response(
        &self,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let key = key.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT status, body FROM idempotent_responses WHERE key = ?1 AND expires_at > ?2",
                )?
                .query_row(params![key, now.as_millis()], |row| {
                    Ok(StoredResponse { status: row.get(0)?, body: row.get(1)? })
                })
                .optional()
                .map_err(Into::into)
            })
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
                // An expired entry under the same key gives way; a live one wins.
                conn.prepare_cached(
                    "INSERT INTO idempotent_responses (key, status, body, expires_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body,
                     expires_at = excluded.expires_at WHERE idempotent_responses.expires_at <= ?5",
                )?
                .execute(params![key, response.status, response.body, expires_at.as_millis(), now.as_millis()])?;
                Ok(())
            })
            .await
    }
}
