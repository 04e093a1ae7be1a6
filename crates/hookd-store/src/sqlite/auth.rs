//! [`AuthStore`] on SQLite: API tokens and `Idempotency-Key` replays.

use async_trait::async_trait;
use hookd_core::{AppId, Timestamp};
use rusqlite::{OptionalExtension, params};

use super::rows::TOKEN_COLUMNS;
use super::{SqliteStore, refused};
use crate::error::taken;
use crate::{ApiToken, AuthStore, StoreError, StoredResponse};

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_token(&self, token: &ApiToken) -> Result<(), StoreError> {
        let token = token.clone();
        self.db
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        token.id,
                        token.token_hash,
                        token.app_id.as_ref().map(AppId::as_str),
                        token.created_at.as_millis(),
                        token.expires_at.map(Timestamp::as_millis),
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
                .query_row([hash], |row| {
                    Ok(ApiToken {
                        id: row.get(0)?,
                        token_hash: row.get(1)?,
                        app_id: row.get::<_, Option<String>>(2)?.map(AppId::from_stored),
                        created_at: Timestamp::from_millis(row.get(3)?),
                        expires_at: row.get::<_, Option<i64>>(4)?.map(Timestamp::from_millis),
                    })
                })
                .optional()
                .map_err(Into::into)
            })
            .await
    }

    async fn has_admin_token(&self) -> Result<bool, StoreError> {
        self.db
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE app_id IS NULL)",
                    [],
                    |row| row.get(0),
                )?)
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
