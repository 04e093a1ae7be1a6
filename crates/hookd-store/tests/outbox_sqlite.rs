//! The transactional outbox on SQLite: a connection sharing hookd's file commits a row that
//! becomes one message, or rolls it back and it never does; ordering keys and rows stored as
//! bytes are read as a producer wrote them.

mod harness;

use hookd_outbox::Event;
use hookd_store::Relayed;

use harness::outbox::*;

#[tokio::test]
async fn sqlite_a_rows_ordering_key_becomes_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookd.db");
    let store = hookd_store::sqlite::SqliteStore::open(&path).await.unwrap();
    acme(&store).await;
    let producer = rusqlite::Connection::open(&path).unwrap();
    producer
        .execute_batch("PRAGMA busy_timeout = 5000;")
        .unwrap();
    for id in ["k1", "k2"] {
        keyed_event(id, "C-4471").insert_sqlite(&producer).unwrap();
    }
    keyed_event("bad", "").insert_sqlite(&producer).unwrap();
    let relayed = relay(&store, &RULES).await;
    assert_eq!((relayed.messages, relayed.failed), (2, 1));
    let key = Some("C-4471".to_owned());
    assert_eq!(
        keyed(&store).await,
        [("k1".into(), key.clone(), false), ("k2".into(), key, true)]
    );
    let error: String = producer
        .query_row("SELECT error FROM outbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(error, "orderingKey: must not be empty");
}

#[tokio::test]
async fn sqlite_a_connection_sharing_the_file_commits_once_and_rolls_back_never() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookd.db");
    let store = hookd_store::sqlite::SqliteStore::open(&path).await.unwrap();
    acme(&store).await;
    // The application's own connection, with its own table, as another process would have.
    let mut producer = rusqlite::Connection::open(&path).unwrap();
    producer
        .execute_batch("PRAGMA busy_timeout = 5000; CREATE TABLE orders (id INTEGER PRIMARY KEY);")
        .unwrap();
    let tx = producer.transaction().unwrap();
    tx.execute("INSERT INTO orders (id) VALUES (1)", [])
        .unwrap();
    event("committed").insert_sqlite(&tx).unwrap();
    tx.commit().unwrap();
    let tx = producer.transaction().unwrap();
    tx.execute("INSERT INTO orders (id) VALUES (2)", [])
        .unwrap();
    event("rolled-back").insert_sqlite(&tx).unwrap();
    tx.rollback().unwrap();
    Event::from_json_text("acme", "order.shipped", "not json")
        .insert_sqlite(&producer)
        .unwrap();
    producer
        .execute("INSERT INTO outbox (app, event_type, payload, channels) VALUES ('acme', 'a.b', '{}', '\"x\"')", [])
        .unwrap();
    Event::from_json_text("acme", "order.shipped", "{}")
        .event_id("after")
        .channels(["eu"])
        .insert_sqlite(&producer)
        .unwrap();

    let relayed = relay(&store, &RULES).await;
    assert_eq!(
        (relayed.messages, relayed.deliveries, relayed.failed),
        (2, 2, 2)
    );
    assert_eq!(
        published(&store, "acme").await,
        [("after".into(), 1), ("committed".into(), 1)]
    );
    assert_eq!(
        relay(&store, &RULES).await,
        Relayed::default(),
        "each row once"
    );
    let errors: Vec<String> = producer
        .prepare("SELECT error FROM outbox ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        errors,
        [
            "payload: is not valid JSON",
            "channels: must be a list of channel names"
        ]
    );
}

#[tokio::test]
async fn sqlite_rows_stored_as_bytes_are_read_as_text_and_bytes_not_utf8_keep_their_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookd.db");
    let store = hookd_store::sqlite::SqliteStore::open(&path).await.unwrap();
    acme(&store).await;
    let producer = rusqlite::Connection::open(&path).unwrap();
    // Values as a client passing bytes stores them: BLOBs, whatever the column's type.
    let insert = "INSERT INTO outbox (app, event_type, payload, event_id) VALUES (?1, ?2, ?3, ?4)";
    let rows: [[&[u8]; 4]; 3] = [
        [b"acme", b"order.shipped", b"{}", b"bytes"],
        [
            b"acme",
            b"order.shipped",
            b"{\"a\": \"\xff\"}",
            b"bad-payload",
        ],
        [b"acme", b"order.\xfe", b"{}", b"bad-type"],
    ];
    for row in rows {
        producer.execute(insert, row).unwrap();
    }
    event("after").insert_sqlite(&producer).unwrap();

    let relayed = relay(&store, &RULES).await;
    assert_eq!((relayed.messages, relayed.failed), (2, 2), "{relayed:?}");
    assert_eq!(
        published(&store, "acme").await,
        [("after".into(), 1), ("bytes".into(), 1)]
    );
    let errors: Vec<(String, String)> = producer
        .prepare("SELECT CAST(event_id AS TEXT), error FROM outbox ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        errors,
        [
            ("bad-payload".into(), "payload: is not UTF-8 text".into()),
            ("bad-type".into(), "eventType: is not UTF-8 text".into()),
        ]
    );
}
