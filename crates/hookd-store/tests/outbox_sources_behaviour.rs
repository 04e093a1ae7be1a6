//! Rows of outbox sources (outbox tables in producers' own databases): each is published once
//! under its table's identity and its id, whatever the relay does after hookd's commit; a
//! refused row leaves no record, so it is published once fixed; a pass's messages keep the
//! rows' order. Each case runs on SQLite and, when configured, PostgreSQL.

mod harness;

use harness::fixtures::{app, first_page};
use hookd_core::{Clock, SystemClock};
use hookd_store::prelude::*;
use hookd_store::{MessageFilter, OutboxRow, RelayRules, RowFate};

const RULES: RelayRules = RelayRules {
    strict_event_types: false,
    max_payload_bytes: 1024,
};

fn row(id: i64, app: &str, n: usize) -> OutboxRow {
    let payload = format!(r#"{{"n": {n}}}"#);
    OutboxRow::from_columns(
        id,
        app.into(),
        "order.shipped".into(),
        payload,
        None,
        None,
        None,
    )
}

/// The payloads of the application's messages, in id order.
async fn payloads(store: &dyn Store, app: &hookd_core::AppId) -> Vec<String> {
    let page = store
        .list_messages(app, &MessageFilter::default(), &first_page(100))
        .await
        .unwrap();
    let mut messages: Vec<_> = page.items;
    messages.sort_by(|a, b| a.id.cmp(&b.id));
    messages
        .into_iter()
        .map(|m| String::from_utf8(m.payload.unwrap()).unwrap())
        .collect()
}

async fn a_row_is_published_once_under_its_table_and_id(store: &dyn Store) {
    let acme = app(Some("acme"), 0);
    store.create_app(&acme).await.unwrap();
    let now = SystemClock.now();
    let rows = vec![row(1, "acme", 1), row(2, "acme", 2)];

    let first = store
        .relay_source_rows("table-a", rows.clone(), &RULES, now)
        .await
        .unwrap();
    let again = store
        .relay_source_rows("table-a", rows.clone(), &RULES, now)
        .await
        .unwrap();
    let other_table = store
        .relay_source_rows("table-b", vec![row(1, "acme", 3)], &RULES, now)
        .await
        .unwrap();

    let published = RowFate::Published { deliveries: 0 };
    assert_eq!(first, [published.clone(), published.clone()]);
    assert_eq!(
        again,
        [RowFate::AlreadyPublished, RowFate::AlreadyPublished]
    );
    assert_eq!(other_table, [published]);
    // Three passes at one `now`: ids made in the same millisecond by different passes have no
    // set order, so which rows were published is compared, not their order.
    let mut published = payloads(store, &acme.id).await;
    published.sort();
    assert_eq!(published, [r#"{"n": 1}"#, r#"{"n": 2}"#, r#"{"n": 3}"#]);
}

async fn a_refused_row_leaves_no_record_and_is_published_once_fixed(store: &dyn Store) {
    let acme = app(Some("acme"), 0);
    store.create_app(&acme).await.unwrap();
    let now = SystemClock.now();

    let refused = store
        .relay_source_rows("t", vec![row(7, "globex", 7)], &RULES, now)
        .await
        .unwrap();
    let fixed = store
        .relay_source_rows("t", vec![row(7, "acme", 7)], &RULES, now)
        .await
        .unwrap();

    assert!(matches!(&refused[..], [RowFate::Refused(why)] if why.contains("globex")));
    assert_eq!(fixed, [RowFate::Published { deliveries: 0 }]);
    assert_eq!(payloads(store, &acme.id).await, [r#"{"n": 7}"#]);
}

async fn a_passs_messages_keep_the_rows_order(store: &dyn Store) {
    let acme = app(Some("acme"), 0);
    store.create_app(&acme).await.unwrap();
    let rows: Vec<OutboxRow> = (0..50).map(|n| row(n as i64 + 1, "acme", n)).collect();

    store
        .relay_source_rows("t", rows, &RULES, SystemClock.now())
        .await
        .unwrap();

    let expected: Vec<String> = (0..50).map(|n| format!(r#"{{"n": {n}}}"#)).collect();
    assert_eq!(payloads(store, &acme.id).await, expected);
}

async fn strict_rules_hold_a_row_to_its_event_types_schema(store: &dyn Store) {
    let acme = app(Some("acme"), 0);
    store.create_app(&acme).await.unwrap();
    let now = SystemClock.now();
    let schema = serde_json::json!({"1": {"type": "object", "required": ["n"],
        "properties": {"n": {"type": "integer", "maximum": 5}}}});
    let event_type = hookd_core::model::EventType {
        name: "order.shipped".into(),
        description: "shipped".into(),
        schemas: Some(schema),
        archived: false,
        deprecated: false,
        feature_flag: None,
        group_name: None,
        feature_flags: None,
        envelope: false,
        created_at: now,
        updated_at: now,
    };
    store.create_event_type(&event_type).await.unwrap();
    let strict = RelayRules {
        strict_event_types: true,
        ..RULES
    };

    let fates = store
        .relay_source_rows(
            "t",
            vec![row(1, "acme", 3), row(2, "acme", 9)],
            &strict,
            now,
        )
        .await
        .unwrap();

    assert_eq!(fates[0], RowFate::Published { deliveries: 0 });
    assert!(
        matches!(&fates[1], RowFate::Refused(why) if why.starts_with("payload: at /n: ")),
        "{fates:?}"
    );
}

behaviour!(
    a_row_is_published_once_under_its_table_and_id,
    a_refused_row_leaves_no_record_and_is_published_once_fixed,
    a_passs_messages_keep_the_rows_order,
    strict_rules_hold_a_row_to_its_event_types_schema,
);
