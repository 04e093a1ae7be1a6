//! The statements of [`crate::AuthStore`].

use hookd_core::{AppId, Timestamp};

use super::{Dialect, ListQuery, Statement, args, sql};
use crate::columns::TOKEN_COLUMNS;
use crate::{ApiToken, StoredResponse};

pub fn insert_token(token: &ApiToken) -> Statement<'_> {
    let sql = sql!(
        "INSERT INTO api_tokens (id, token_hash, app_id, created_at, expires_at, name,
         revoked_at, rate_limit, read_only) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
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
