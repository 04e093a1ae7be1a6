//! SQLite's schema migrations: the versioned files of `migrations/sqlite/`, each applied once,
//! in its own transaction, when the writer opens the database.
//!
//! A migration that rebuilds a table other tables refer to (SQLite's twelve-step rebuild: a
//! new table, the rows copied, the old one dropped and the new one renamed) opens with
//! [`FOREIGN_KEYS_OFF`]. With foreign keys on, dropping the old table would first delete its
//! rows, and with them, by cascade, every row referring to them. SQLite changes that setting
//! only outside a transaction, so the runner turns it off around such a migration, and checks
//! every foreign key inside the migration's transaction before it commits. A crash at any
//! point leaves the migration undone (the setting belongs to the connection, not the file),
//! to be run again at the next start.

use rusqlite::{Connection, OptionalExtension};

use crate::StoreError;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/sqlite/0001_init.sql")),
    (2, include_str!("../../migrations/sqlite/0002_keys.sql")),
    (4, include_str!("../../migrations/sqlite/0004_outbox.sql")),
    (
        5,
        include_str!("../../migrations/sqlite/0005_portal_search.sql"),
    ),
    (
        6,
        include_str!("../../migrations/sqlite/0006_retention.sql"),
    ),
    (
        7,
        include_str!("../../migrations/sqlite/0007_clustered_queue.sql"),
    ),
    (
        8,
        include_str!("../../migrations/sqlite/0008_endpoint_max_concurrency.sql"),
    ),
    (
        9,
        include_str!("../../migrations/sqlite/0009_event_type_groups.sql"),
    ),
    (
        10,
        include_str!("../../migrations/sqlite/0010_record_deletion.sql"),
    ),
    (11, include_str!("../../migrations/sqlite/0011_notices.sql")),
    (
        12,
        include_str!("../../migrations/sqlite/0012_ordered_delivery.sql"),
    ),
    (
        13,
        include_str!("../../migrations/sqlite/0013_message_tags.sql"),
    ),
    (
        14,
        include_str!("../../migrations/sqlite/0014_outbox_sources.sql"),
    ),
    (
        15,
        include_str!("../../migrations/sqlite/0015_background_tasks.sql"),
    ),
    (
        16,
        include_str!("../../migrations/sqlite/0016_event_id_check_in_publish.sql"),
    ),
    (
        17,
        include_str!("../../migrations/sqlite/0017_settling_queues_next_in_order.sql"),
    ),
    (
        18,
        include_str!("../../migrations/sqlite/0018_status_index_leaves_out_delivered.sql"),
    ),
    (
        19,
        include_str!("../../migrations/sqlite/0019_sealed_replays.sql"),
    ),
    (
        20,
        include_str!("../../migrations/sqlite/0020_destinations.sql"),
    ),
    (
        21,
        include_str!("../../migrations/sqlite/0021_payload_envelope.sql"),
    ),
    (
        22,
        include_str!("../../migrations/sqlite/0022_key_digests.sql"),
    ),
    (
        23,
        include_str!("../../migrations/sqlite/0023_ingest_sources.sql"),
    ),
    (
        24,
        include_str!("../../migrations/sqlite/0024_event_id_key_only_where_set.sql"),
    ),
];

/// The first line of a migration to run with foreign keys off (see the module's documentation).
const FOREIGN_KEYS_OFF: &str = "-- hookd: foreign keys off";

pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    migrate_through(conn, MIGRATIONS)
}

/// Applies those of `migrations` the database has not had.
fn migrate_through(conn: &Connection, migrations: &[(i64, &str)]) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )?;
    // Every version not yet applied, not only those above the highest: migrations numbered
    // on separate branches may arrive out of order.
    let applied: Vec<i64> = conn
        .prepare("SELECT version FROM schema_migrations")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for (version, sql) in migrations.iter().filter(|(v, _)| !applied.contains(v)) {
        tracing::info!(version, "applying SQLite migration");
        if sql.starts_with(FOREIGN_KEYS_OFF) {
            apply_with_foreign_keys_off(conn, *version, sql)?;
        } else {
            apply(conn, *version, sql, false)?;
        }
    }
    Ok(())
}

/// Applies migration `version` in one transaction; with `check`, only if every foreign key
/// still finds its parent row.
fn apply(conn: &Connection, version: i64, sql: &str, check: bool) -> Result<(), StoreError> {
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(sql)?;
    if check {
        let orphan: Option<String> = tx
            .query_row("PRAGMA foreign_key_check", [], |row| row.get(0))
            .optional()?;
        if let Some(table) = orphan {
            return Err(StoreError::Corrupt(format!(
                "SQLite migration {version} left a row of {table} without its parent"
            )));
        }
    }
    tx.execute(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000)",
        [version],
    )?;
    tx.commit()?;
    Ok(())
}

/// Applies a migration that rebuilds a parent table: foreign keys off around its transaction,
/// on again after it, whether it applied or not.
fn apply_with_foreign_keys_off(
    conn: &Connection,
    version: i64,
    sql: &str,
) -> Result<(), StoreError> {
    set_foreign_keys(conn, false)?;
    let applied = apply(conn, version, sql, true);
    set_foreign_keys(conn, true)?;
    applied
}

/// Turns foreign keys on or off, and makes sure they are: inside a transaction SQLite ignores
/// the setting, and a rebuild that dropped a parent table with them on would delete its
/// children.
fn set_foreign_keys(conn: &Connection, on: bool) -> Result<(), StoreError> {
    conn.pragma_update(None, "foreign_keys", on)?;
    let now: bool = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
    if now != on {
        return Err(StoreError::Unavailable(format!(
            "SQLite kept foreign keys {}",
            if now { "on" } else { "off" }
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::writer::{TWO_MESSAGES_TO_ONE_ENDPOINT, connect, migrated};

    /// Rows in schema v1's columns: `msg_1` with an `eventId` and a delivery and an attempt,
    /// `msg_2` with neither and its delivery due.
    const V1_ROWS: &str = "
        INSERT INTO applications (id, name, metadata, created_at, updated_at)
            VALUES ('app_1', 'a', '{}', 0, 0);
        INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
            secret, created_at, updated_at)
            VALUES ('ep_1', 'app_1', 'http://localhost/', '', 0, '{}', '{}', 's', 0, 0);
        INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at)
            VALUES ('msg_1', 'app_1', 't', 'evt_1', '[\"c\"]', x'7b7d', 1),
                   ('msg_2', 'app_1', 't', NULL, NULL, x'7b2261223a317d', 2);
        INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
            next_attempt_at, updated_at, manual)
            VALUES ('msg_1', 'ep_1', 0, 1, NULL, 5, 0), ('msg_2', 'ep_1', 1, 0, 9, 6, 1);
        INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code, response,
            response_head, response_duration_ms, status, trigger_type, created_at)
            VALUES ('atmpt_1', 'msg_1', 'ep_1', 'http://localhost/', 200, 'ok', 'HTTP/1.1 200',
                3, 0, 0, 5);";

    /// Each row of `sql`'s one (text) column.
    fn rows(conn: &Connection, sql: &str) -> Vec<String> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The rows of `V1_ROWS`' tables, in v1's columns, and the schema.
    fn contents(conn: &Connection) -> Vec<String> {
        [
            "SELECT json_array(id, app_id, event_type, event_id, channels, hex(payload),
                 created_at) FROM messages ORDER BY id",
            "SELECT json_array(message_id, endpoint_id, status, attempt_count, next_attempt_at,
                 updated_at, manual) FROM deliveries ORDER BY message_id",
            "SELECT json_array(id, message_id, endpoint_id, url, response_status_code, response,
                 response_head, response_duration_ms, status, trigger_type, created_at)
                 FROM attempts",
        ]
        .iter()
        .flat_map(|sql| rows(conn, sql))
        .collect()
    }

    /// Every table, index and trigger as created.
    fn schema(conn: &Connection) -> Vec<String> {
        rows(
            conn,
            "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master
             WHERE name <> 'schema_migrations' ORDER BY type, name",
        )
    }

    #[test]
    fn a_database_at_every_earlier_version_migrates_with_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = schema(&migrated(&dir.path().join("fresh.db")));
        for reached in 1..MIGRATIONS.len() {
            let conn = connect(&dir.path().join(format!("at_{reached}.db"))).unwrap();
            migrate_through(&conn, &MIGRATIONS[..1]).unwrap();
            conn.execute_batch(V1_ROWS).unwrap();
            migrate_through(&conn, &MIGRATIONS[..reached]).unwrap();
            let before = contents(&conn);

            migrate(&conn).unwrap();

            let at = MIGRATIONS[reached - 1].0;
            assert_eq!(contents(&conn), before, "from v{at}");
            assert_eq!(schema(&conn), fresh, "from v{at}");
            let foreign_keys: bool = conn
                .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
                .unwrap();
            assert!(foreign_keys, "from v{at}");
            assert!(rows(&conn, "PRAGMA foreign_key_check").is_empty());
        }
    }

    #[test]
    fn an_event_id_is_taken_once_an_application_and_no_event_id_never() {
        let dir = tempfile::tempdir().unwrap();
        let conn = migrated(&dir.path().join("hookd.db"));
        conn.execute_batch(V1_ROWS).unwrap();
        let insert = |id: &str, event_id: Option<&str>| {
            conn.execute(
                "INSERT INTO messages (id, app_id, event_type, event_id, created_at)
                 VALUES (?1, 'app_1', 't', ?2, 0)",
                rusqlite::params![id, event_id],
            )
        };
        insert("msg_3", None).unwrap();
        insert("msg_4", Some("evt_2")).unwrap();
        let taken = insert("msg_5", Some("evt_1")).unwrap_err();
        assert!(matches!(
            crate::sqlite::violation(&taken),
            Some(crate::sqlite::Violation::Taken)
        ));
    }

    /// Applies `sql` as migration 99, to be run with foreign keys off.
    fn rebuild(conn: &Connection, sql: &str) -> Result<(), StoreError> {
        let sql = format!("{FOREIGN_KEYS_OFF}\n{sql}");
        migrate_through(conn, &[(99, sql.as_str())])
    }

    #[test]
    fn a_rebuild_that_fails_midway_leaves_every_row_and_foreign_keys_on() {
        let dir = tempfile::tempdir().unwrap();
        let conn = migrated(&dir.path().join("hookd.db"));
        conn.execute_batch(V1_ROWS).unwrap();
        let before = (contents(&conn), schema(&conn));
        // Fails once the parent table is dropped, before anything takes its place.
        let failed = rebuild(
            &conn,
            "DROP TABLE messages; INSERT INTO nowhere VALUES (1);",
        );

        assert!(failed.is_err());
        assert_eq!((contents(&conn), schema(&conn)), before);
        let foreign_keys: bool = conn
            .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
            .unwrap();
        assert!(foreign_keys);
        assert!(
            rows(
                &conn,
                "SELECT CAST(version AS TEXT) FROM schema_migrations WHERE version = 99"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_rebuild_that_would_leave_a_row_without_its_parent_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let conn = migrated(&dir.path().join("hookd.db"));
        conn.execute_batch(V1_ROWS).unwrap();
        let before = contents(&conn);
        // With foreign keys off, nothing deletes msg_1's delivery and attempt with it.
        let orphaned = rebuild(&conn, "DELETE FROM messages WHERE id = 'msg_1';");

        assert!(
            matches!(orphaned, Err(StoreError::Corrupt(_))),
            "{orphaned:?}"
        );
        assert_eq!(contents(&conn), before);
    }

    #[test]
    fn a_migration_numbered_below_the_highest_applied_is_still_applied() {
        let dir = tempfile::tempdir().unwrap();
        let conn = migrated(&dir.path().join("hookd.db"));
        // As if migration 5 came from a branch merged after a database had reached 99.
        conn.execute_batch(
            "DROP INDEX messages_by_app_event_type;
             DELETE FROM schema_migrations WHERE version = 5;
             INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0);",
        )
        .unwrap();
        migrate(&conn).unwrap();
        let restored: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'messages_by_app_event_type'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(restored, 1);
    }

    #[test]
    fn the_v7_rebuild_keeps_every_delivery_and_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connect(&dir.path().join("hookd.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
        )
        .unwrap();
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v < 7) {
            conn.execute_batch(sql).unwrap();
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 0)", [version])
                .unwrap();
        }
        conn.execute_batch(TWO_MESSAGES_TO_ONE_ENDPOINT).unwrap();
        conn.execute_batch(
            "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at, manual)
                 VALUES ('msg_1', 'ep_1', 2, 1, NULL, 5, 0), ('msg_2', 'ep_1', 0, 0, 9, 6, 1);
             INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code,
                 response, response_head, response_duration_ms, status, trigger_type, created_at)
                 VALUES ('atmpt_1', 'msg_1', 'ep_1', 'http://localhost/', 200, 'ok', 'HTTP/1.1 200',
                     3, 0, 0, 5);",
        )
        .unwrap();
        let rows = |sql: &str| rows(&conn, sql);
        let deliveries = "SELECT json_array(message_id, endpoint_id, status, attempt_count,
            next_attempt_at, updated_at, manual) FROM deliveries ORDER BY message_id";
        let attempts = "SELECT json_array(id, message_id, endpoint_id, url, response_status_code,
            response, response_head, response_duration_ms, status, trigger_type, created_at)
            FROM attempts";
        let before = (rows(deliveries), rows(attempts));

        migrate(&conn).unwrap();

        assert_eq!((rows(deliveries), rows(attempts)), before);
        for table in ["deliveries", "attempts"] {
            let has_rowid = conn.prepare(&format!("SELECT rowid FROM {table}")).is_ok();
            assert!(!has_rowid, "{table} is kept in its primary key");
        }
        let indexes = rows(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
             AND tbl_name IN ('deliveries', 'attempts') ORDER BY name",
        );
        assert_eq!(
            indexes,
            [
                "attempts_by_endpoint",
                "deliveries_by_endpoint",
                "deliveries_by_endpoint_status",
                "deliveries_endpoint_due",
                "deliveries_key_head",
                "deliveries_key_waiting"
            ]
        );
    }
}
