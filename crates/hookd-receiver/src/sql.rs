//! The statements both backends run, written once with PostgreSQL's `$N` placeholders (the SQLite
//! backend turns them into `?N`); both have `ON CONFLICT … DO NOTHING / DO UPDATE … WHERE` and
//! `RETURNING`.
//! Table names come from the caller, so they are checked to be plain identifiers first.

use crate::StoreError;

/// A checked table name: a lowercase letter or `_`, then lowercase letters, digits or `_`
/// (at most 63 bytes, PostgreSQL's limit), safe to put into SQL text unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table(String);

impl Table {
    pub(crate) fn new(name: &str) -> Result<Self, StoreError> {
        let mut bytes = name.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
        let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if first_ok && rest_ok && name.len() <= 63 {
            Ok(Self(name.to_owned()))
        } else {
            Err(StoreError::TableName(name.to_owned()))
        }
    }
}

/// Inbox table and its indexes (pending rows by age for claims; processed rows by when, for
/// purging); `payload` is the given binary type (BLOB or BYTEA).
pub(crate) fn create_inbox(table: &Table, binary: &str) -> [String; 3] {
    let t = &table.0;
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (
                webhook_id TEXT PRIMARY KEY,
                received_at BIGINT NOT NULL,
                payload {binary},
                claimed_until BIGINT NOT NULL DEFAULT 0,
                processed_at BIGINT
            )"
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {t}_pending ON {t} (received_at) \
             WHERE processed_at IS NULL"
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {t}_processed ON {t} (processed_at) \
             WHERE processed_at IS NOT NULL"
        ),
    ]
}

/// `$1` id, `$2` now, `$3` payload: one row if new, none if a duplicate.
pub(crate) fn record(table: &Table) -> String {
    format!(
        "INSERT INTO {} (webhook_id, received_at, payload) VALUES ($1, $2, $3) \
         ON CONFLICT (webhook_id) DO NOTHING",
        table.0
    )
}

/// `$1` lease end, `$2` now, `$3` limit; `lock` is `FOR UPDATE SKIP LOCKED` on PostgreSQL
/// (SQLite runs one statement at a time, so it needs none).
pub(crate) fn claim(table: &Table, lock: &str) -> String {
    let t = &table.0;
    format!(
        "UPDATE {t} SET claimed_until = $1 WHERE webhook_id IN (
            SELECT webhook_id FROM {t}
            WHERE processed_at IS NULL AND claimed_until <= $2
            ORDER BY received_at LIMIT $3 {lock}
        ) RETURNING webhook_id, payload, received_at"
    )
}

/// `$1` id, `$2` now; the payload stays only if `keep_payload`.
pub(crate) fn mark_processed(table: &Table, keep_payload: bool) -> String {
    let payload = if keep_payload { "" } else { ", payload = NULL" };
    format!(
        "UPDATE {} SET processed_at = $2{payload} WHERE webhook_id = $1",
        table.0
    )
}

/// `$1` id: one row changed if a processed row with its payload went back to the queue.
pub(crate) fn reprocess(table: &Table) -> String {
    format!(
        "UPDATE {} SET processed_at = NULL, claimed_until = 0 \
         WHERE webhook_id = $1 AND processed_at IS NOT NULL AND payload IS NOT NULL",
        table.0
    )
}

/// `$1` cutoff: payloads of rows processed before it.
pub(crate) fn drop_payloads(table: &Table) -> String {
    format!(
        "UPDATE {} SET payload = NULL WHERE processed_at < $1 AND payload IS NOT NULL",
        table.0
    )
}

pub(crate) fn backlog(table: &Table) -> String {
    format!(
        "SELECT count(*) FROM {} WHERE processed_at IS NULL",
        table.0
    )
}

/// `$1` cutoff: rows processed before it (a pending row's NULL never compares true).
pub(crate) fn purge(table: &Table) -> String {
    format!("DELETE FROM {} WHERE processed_at < $1", table.0)
}

pub(crate) fn create_versions(table: &Table) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (
            key TEXT PRIMARY KEY,
            version BIGINT NOT NULL,
            state TEXT NOT NULL
        )",
        table.0
    )
}

/// `$1` key, `$2` version, `$3` state: one row changed if applied, none if stale.
pub(crate) fn apply(table: &Table) -> String {
    let t = &table.0;
    format!(
        "INSERT INTO {t} (key, version, state) VALUES ($1, $2, $3) \
         ON CONFLICT (key) DO UPDATE SET version = excluded.version, state = excluded.state \
         WHERE {t}.version < excluded.version"
    )
}

/// `$1` key.
pub(crate) fn get(table: &Table) -> String {
    format!("SELECT version, state FROM {} WHERE key = $1", table.0)
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn only_plain_identifiers_are_table_names() {
        for good in ["webhook_inbox", "_t", "consignments2"] {
            assert!(Table::new(good).is_ok(), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "2t",
            "Inbox",
            "a-b",
            "a;drop table x",
            "a b",
            "\"t\"",
            &long,
        ] {
            assert!(Table::new(bad).is_err(), "{bad}");
        }
    }
}
