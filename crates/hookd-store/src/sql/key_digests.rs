//! [`KeyDigestStore`] on both databases: lookups by digest and an upsert that marks a key
//! shown at most once.

use async_trait::async_trait;
use hookd_core::{EndpointId, Timestamp};

use super::endpoints::sealed_row;
use super::{Arg, Database, Dialect, Statement, args, sql};
use crate::{KeyDigestStore, SealedRow, StoreError};

#[async_trait]
impl<D: Database> KeyDigestStore for D {
    async fn key_held_elsewhere(
        &self,
        digest: &str,
        endpoint: &EndpointId,
    ) -> Result<bool, StoreError> {
        let sql = sql!(
            "SELECT EXISTS (SELECT 1 FROM endpoint_key_digests
             WHERE digest = ?1 AND endpoint_id <> ?2)"
        );
        let statement = Statement::new(sql, args![digest, endpoint.as_str()]);
        Ok(self.read_one(statement, |row| row.bool(0)).await? == Some(true))
    }

    async fn set_key_digests(
        &self,
        endpoint: &EndpointId,
        key_id: &str,
        digests: &[String],
        carry_shown: bool,
    ) -> Result<(), StoreError> {
        // Added first, then the others removed: a crash in between leaves a digest too many
        // (a key refused that no endpoint holds any more), never one missing.
        let insert = sql!(
            "INSERT INTO endpoint_key_digests (endpoint_id, digest, key_id, shown_at)
             VALUES (?1, ?2, ?3, CASE WHEN ?4 THEN
                 (SELECT max(shown_at) FROM endpoint_key_digests WHERE endpoint_id = ?1) END)
             ON CONFLICT (endpoint_id, digest) DO NOTHING"
        );
        for digest in digests {
            let args = args![endpoint.as_str(), digest.as_str(), key_id, carry_shown];
            self.write(Statement::new(insert, args), None).await?;
        }
        self.write(others(D::DIALECT, endpoint, digests), None)
            .await?;
        Ok(())
    }

    async fn mark_key_shown(
        &self,
        endpoint: &EndpointId,
        key_id: &str,
        digest: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let sql = sql!(
            "INSERT INTO endpoint_key_digests (endpoint_id, digest, key_id, shown_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (endpoint_id, digest) DO UPDATE SET shown_at = excluded.shown_at
             WHERE endpoint_key_digests.shown_at IS NULL"
        );
        let statement = Statement::new(sql, args![endpoint.as_str(), digest, key_id, at]);
        Ok(self.write(statement, None).await? == 1)
    }

    async fn endpoints_without_digests(
        &self,
        key_id: &str,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<SealedRow>, StoreError> {
        let sql = sql!(
            "SELECT e.id, e.secret, e.headers FROM endpoints e
             WHERE e.id > ?1 AND NOT EXISTS (SELECT 1 FROM endpoint_key_digests d
                 WHERE d.endpoint_id = e.id AND d.key_id = ?2)
             ORDER BY e.id LIMIT ?3"
        );
        let args = args![after.map_or("", EndpointId::as_str), key_id, limit];
        self.read(Statement::new(sql, args), sealed_row).await
    }
}

/// Deletes the endpoint's digests that are not in `kept`.
fn others<'a>(dialect: Dialect, endpoint: &'a EndpointId, kept: &[String]) -> Statement<'a> {
    let sql = match dialect {
        Dialect::Sqlite => sql!(
            "DELETE FROM endpoint_key_digests
             WHERE endpoint_id = ?1 AND digest NOT IN (SELECT value FROM json_each(?2))"
        )
        .only(Dialect::Sqlite),
        Dialect::Postgres => sql!(
            "DELETE FROM endpoint_key_digests WHERE endpoint_id = ?1 AND NOT (digest = ANY(?2))"
        )
        .only(Dialect::Postgres),
    };
    Statement::new(
        sql,
        vec![Arg::from(endpoint.as_str()), Arg::from(kept.to_vec())],
    )
}
