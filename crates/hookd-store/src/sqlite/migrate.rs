//! SQLite's schema migrations: the versioned files of `migrations/sqlite/`, each applied once,
//! in its own transaction, when the writer opens the database.

use rusqlite::Connection;

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
        include_str!("../../migrations/sqlite/0022_ingest_sources.sql"),
    ),
];

pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )?;
    // Every version not yet applied, not only those above the highest: migrations numbered
    // on separate branches may arrive out of order.
    let applied: Vec<i64> = conn
        .prepare("SELECT version FROM schema_migrations")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| !applied.contains(v)) {
        tracing::info!(version, "applying SQLite migration");
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000)",
            [version],
        )?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::writer::{TWO_MESSAGES_TO_ONE_ENDPOINT, connect, migrated};

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
        let rows = |sql: &str| -> Vec<String> {
            conn.prepare(sql)
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
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
