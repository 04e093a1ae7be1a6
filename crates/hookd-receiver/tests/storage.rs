//! The inbox and the version store on real SQLite files and real PostgreSQL databases (one
//! fresh database per test, dropped after it), each scenario run on both through the traits.
//! Includes the seed's ordering scenario and concurrent writers, which a read-then-write
//! implementation would fail.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookd_receiver::{
    Applied, DEFAULT_RETENTION, Inbox, InboxOptions, PgDb, Seen, SqliteDb, VersionStore,
};
use hookd_store::testing::{PgDatabaseGuard, fresh_postgres};
use tempfile::TempDir;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// A clock the test moves (unix ms), and inbox options reading it.
fn manual_clock(start_ms: i64) -> (Arc<AtomicI64>, InboxOptions) {
    let now = Arc::new(AtomicI64::new(start_ms));
    let read = now.clone();
    let options = InboxOptions {
        clock: Arc::new(move || {
            UNIX_EPOCH + Duration::from_millis(read.load(Ordering::SeqCst) as u64)
        }),
        ..InboxOptions::default()
    };
    (now, options)
}

fn sqlite() -> (SqliteDb, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (SqliteDb::open(dir.path().join("receiver.db")).unwrap(), dir)
}

async fn postgres(test: &str) -> Option<(PgDb, PgDatabaseGuard)> {
    let (url, guard) = fresh_postgres(test).await?;
    Some((PgDb::connect(&url).await.unwrap(), guard))
}

// ---- inbox ----

async fn records_once_then_duplicates(inbox: impl Inbox, now: Arc<AtomicI64>) {
    assert_eq!(
        inbox.record("msg_1", b"{\"a\":1}").await.unwrap(),
        Seen::New
    );
    now.fetch_add(1, Ordering::SeqCst);
    assert_eq!(
        inbox.record("msg_1", b"{\"a\":1}").await.unwrap(),
        Seen::Duplicate
    );
    assert_eq!(inbox.record("msg_2", b"{}").await.unwrap(), Seen::New);
    let claimed = inbox.claim(10).await.unwrap();
    let ids: Vec<_> = claimed.iter().map(|p| p.webhook_id.as_str()).collect();
    assert_eq!(ids, ["msg_1", "msg_2"], "each id once, oldest first");
    assert_eq!(
        inbox.backlog().await.unwrap(),
        2,
        "claimed is still backlog"
    );
    assert_eq!(claimed[0].payload, b"{\"a\":1}");
    inbox.mark_processed("msg_1").await.unwrap();
    assert_eq!(
        inbox.record("msg_1", b"{\"a\":1}").await.unwrap(),
        Seen::Duplicate,
        "a processed id still catches retries"
    );
    assert_eq!(inbox.backlog().await.unwrap(), 1);
}

async fn concurrent_deliveries_of_one_id_get_one_new(inbox: impl Inbox + Clone + 'static) {
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let inbox = inbox.clone();
            tokio::spawn(async move { inbox.record("msg_same", b"{}").await.unwrap() })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        new += usize::from(task.await.unwrap() == Seen::New);
    }
    assert_eq!(new, 1);
}

async fn claims_are_leased_and_come_back_if_not_processed(inbox: impl Inbox, now: Arc<AtomicI64>) {
    inbox.record("msg_a", b"a").await.unwrap();
    now.fetch_add(1, Ordering::SeqCst);
    inbox.record("msg_b", b"b").await.unwrap();
    assert_eq!(
        inbox.claim(1).await.unwrap()[0].webhook_id,
        "msg_a",
        "limit and age order"
    );
    assert_eq!(inbox.claim(10).await.unwrap()[0].webhook_id, "msg_b");
    assert!(inbox.claim(10).await.unwrap().is_empty(), "both are leased");
    inbox.mark_processed("msg_b").await.unwrap();
    now.fetch_add(5 * 60 * 1000 + 1, Ordering::SeqCst);
    let again = inbox.claim(10).await.unwrap();
    let ids: Vec<_> = again.iter().map(|p| p.webhook_id.as_str()).collect();
    assert_eq!(
        ids,
        ["msg_a"],
        "an unfinished claim returns after the lease; a processed one never"
    );
    assert_eq!(again[0].payload, b"a");
}

async fn purge_keeps_the_window_and_pending_rows(inbox: impl Inbox, now: Arc<AtomicI64>) {
    assert_eq!(DEFAULT_RETENTION, Duration::from_secs(30 * 86_400));
    inbox.record("msg_old", b"{}").await.unwrap();
    inbox.record("msg_unprocessed", b"{}").await.unwrap();
    inbox.mark_processed("msg_old").await.unwrap();
    now.fetch_add(29 * DAY_MS, Ordering::SeqCst);
    inbox.record("msg_recent", b"{}").await.unwrap();
    inbox.mark_processed("msg_recent").await.unwrap();
    assert_eq!(
        inbox.purge().await.unwrap(),
        0,
        "29 days: inside the window"
    );
    assert_eq!(
        inbox.record("msg_old", b"{}").await.unwrap(),
        Seen::Duplicate
    );
    now.fetch_add(DAY_MS + 1, Ordering::SeqCst);
    assert_eq!(
        inbox.purge().await.unwrap(),
        1,
        "only the processed id past 30 days"
    );
    assert_eq!(
        inbox.record("msg_recent", b"{}").await.unwrap(),
        Seen::Duplicate
    );
    assert_eq!(
        inbox.record("msg_unprocessed", b"{}").await.unwrap(),
        Seen::Duplicate,
        "a pending webhook is never purged"
    );
    assert_eq!(
        inbox.record("msg_old", b"{}").await.unwrap(),
        Seen::New,
        "forgotten after the window"
    );
}

async fn payloads_are_dropped_when_processed_by_default(inbox: impl Inbox) {
    inbox.record("msg_p", b"{\"n\":1}").await.unwrap();
    inbox.claim(10).await.unwrap();
    inbox.mark_processed("msg_p").await.unwrap();
    assert!(
        !inbox.reprocess("msg_p").await.unwrap(),
        "without keep_payloads nothing is left to process again"
    );
    assert!(inbox.claim(10).await.unwrap().is_empty());
}

/// With payloads kept for 7 days: a processed webhook goes back to the queue with the bytes
/// that arrived, again and again, until its payload is dropped by a purge after 7 days; its
/// id stays for the 30-day window.
async fn kept_payloads_are_processed_again_until_dropped(inbox: impl Inbox, now: Arc<AtomicI64>) {
    inbox.record("msg_k", b"{\"raw\": true}").await.unwrap();
    inbox.record("msg_pending", b"{}").await.unwrap();
    assert!(
        !inbox.reprocess("msg_pending").await.unwrap(),
        "a pending webhook is already queued"
    );
    assert!(!inbox.reprocess("msg_unknown").await.unwrap());
    let claimed = inbox.claim(1).await.unwrap();
    assert_eq!(claimed[0].webhook_id, "msg_k");
    inbox.mark_processed("msg_k").await.unwrap();
    assert_eq!(inbox.backlog().await.unwrap(), 1);

    now.fetch_add(6 * DAY_MS, Ordering::SeqCst);
    assert_eq!(inbox.purge().await.unwrap(), 0);
    assert!(inbox.reprocess("msg_k").await.unwrap());
    assert_eq!(inbox.backlog().await.unwrap(), 2, "back in the queue");
    let again = inbox.claim(10).await.unwrap();
    let ids: Vec<_> = again.iter().map(|p| p.webhook_id.as_str()).collect();
    assert_eq!(ids, ["msg_k", "msg_pending"], "in order of arrival");
    assert_eq!(
        again[0].payload, b"{\"raw\": true}",
        "the bytes as they arrived"
    );
    inbox.mark_processed("msg_k").await.unwrap();

    // 7 days after the second processing, the payload goes; the id stays.
    now.fetch_add(7 * DAY_MS + 1, Ordering::SeqCst);
    assert_eq!(inbox.purge().await.unwrap(), 0, "ids stay for 30 days");
    assert!(
        !inbox.reprocess("msg_k").await.unwrap(),
        "the payload was dropped"
    );
    assert_eq!(
        inbox.record("msg_k", b"{}").await.unwrap(),
        Seen::Duplicate,
        "the id still catches retries"
    );
}

/// Every inbox scenario, each on a fresh table `open` makes, with its own clock.
async fn inbox_scenarios<I: Inbox + Clone + 'static>(open: impl AsyncFn(&str, InboxOptions) -> I) {
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (now, options) = manual_clock(start);
    records_once_then_duplicates(open("inbox_a", options.clone()).await, now).await;
    concurrent_deliveries_of_one_id_get_one_new(open("inbox_b", options).await).await;
    let (now, options) = manual_clock(start);
    claims_are_leased_and_come_back_if_not_processed(open("inbox_c", options).await, now).await;
    let (now, options) = manual_clock(start);
    purge_keeps_the_window_and_pending_rows(open("inbox_d", options.clone()).await, now).await;
    payloads_are_dropped_when_processed_by_default(open("inbox_e", options).await).await;
    let (now, options) = manual_clock(start);
    let keeping = InboxOptions {
        keep_payloads: Duration::from_secs(7 * 86_400),
        ..options
    };
    kept_payloads_are_processed_again_until_dropped(open("inbox_f", keeping).await, now).await;
}

#[tokio::test]
async fn inbox_on_sqlite() {
    let (db, _dir) = sqlite();
    inbox_scenarios(async |table, options| db.inbox(table, options).await.unwrap()).await;
}

#[tokio::test]
async fn inbox_on_postgres() {
    let Some((db, _guard)) = postgres("inbox_on_postgres").await else {
        return;
    };
    inbox_scenarios(async |table, options| db.inbox(table, options).await.unwrap()).await;
}

#[tokio::test]
async fn an_inbox_reopened_on_the_same_file_remembers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receiver.db");
    let first = SqliteDb::open(&path)
        .unwrap()
        .inbox("webhook_inbox", InboxOptions::default())
        .await
        .unwrap();
    assert_eq!(first.record("msg_1", b"{}").await.unwrap(), Seen::New);
    drop(first);
    let again = SqliteDb::open(&path)
        .unwrap()
        .inbox("webhook_inbox", InboxOptions::default())
        .await
        .unwrap();
    assert_eq!(again.record("msg_1", b"{}").await.unwrap(), Seen::Duplicate);
    assert_eq!(
        again.claim(10).await.unwrap().len(),
        1,
        "still pending after the restart"
    );
}

#[tokio::test]
async fn bad_table_names_are_refused() {
    let (db, _dir) = sqlite();
    let error = db.versions("x; DROP TABLE y").await.unwrap_err();
    assert!(
        error.to_string().starts_with("invalid table name"),
        "{error}"
    );
    assert!(db.inbox("Inbox", InboxOptions::default()).await.is_err());
}

// ---- ordering ----

/// Seed 001: C-4471 is at version 2 (loaded); `delivered` (4) arrives before the delayed
/// `in transit` (3); retries of both arrive again. Every delivery is recorded (new or
/// duplicate, all acknowledged) and the worker applies only what the inbox says is new; the
/// record ends at delivered, version 4.
async fn seed_scenario(inbox: impl Inbox, consignments: impl VersionStore) {
    let loaded = r#"{"status":"loaded"}"#;
    assert_eq!(
        consignments.apply("C-4471", 2, loaded).await.unwrap(),
        Applied::Newer
    );
    let delivered = ("msg_delivered", 4, r#"{"status":"delivered"}"#);
    let in_transit = ("msg_in_transit", 3, r#"{"status":"in transit"}"#);
    let arrivals = [delivered, in_transit, delivered, in_transit, delivered];
    let expected_seen = [
        Seen::New,
        Seen::New,
        Seen::Duplicate,
        Seen::Duplicate,
        Seen::Duplicate,
    ];
    let expected_applied = [Some(Applied::Newer), Some(Applied::Stale), None, None, None];
    for (((id, version, state), seen), applied) in arrivals
        .into_iter()
        .zip(expected_seen)
        .zip(expected_applied)
    {
        assert_eq!(
            inbox.record(id, state.as_bytes()).await.unwrap(),
            seen,
            "{id}"
        );
        let got = match seen {
            Seen::New => Some(consignments.apply("C-4471", version, state).await.unwrap()),
            Seen::Duplicate => None,
        };
        assert_eq!(got, applied, "{id} v{version}");
        assert_eq!(
            consignments.get("C-4471").await.unwrap(),
            Some((4, r#"{"status":"delivered"}"#.to_owned())),
            "after {id}"
        );
    }
    // Even applied again (a worker re-running after a crash), neither changes anything.
    assert_eq!(
        consignments.apply("C-4471", 4, delivered.2).await.unwrap(),
        Applied::Stale
    );
    assert_eq!(
        consignments.apply("C-4471", 3, in_transit.2).await.unwrap(),
        Applied::Stale
    );
    assert_eq!(consignments.get("C-4471").await.unwrap().unwrap().0, 4);
    assert_eq!(consignments.get("C-9999").await.unwrap(), None);
}

/// 40 versions of one key applied at once in a scrambled order: the highest always wins and
/// exactly as many applies report Newer as took the stored version up.
async fn concurrent_applies_keep_the_highest(consignments: impl VersionStore + Clone + 'static) {
    let versions: Vec<i64> = (1..=40).map(|i| (i * 17) % 41).collect();
    let tasks: Vec<_> = versions
        .into_iter()
        .map(|version| {
            let store = consignments.clone();
            tokio::spawn(async move {
                store
                    .apply("C-1", version, &format!("v{version}"))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut newer = 0;
    for task in tasks {
        newer += usize::from(task.await.unwrap() == Applied::Newer);
    }
    assert!(newer >= 1);
    assert_eq!(
        consignments.get("C-1").await.unwrap(),
        Some((40, "v40".to_owned()))
    );
}

/// Both ordering scenarios, on the inbox and version tables `open` makes.
async fn ordering_scenarios<I: Inbox, V: VersionStore + Clone + 'static>(
    open: impl AsyncFn(&str) -> (I, V),
) {
    let (inbox, consignments) = open("consignments").await;
    seed_scenario(inbox, consignments).await;
    concurrent_applies_keep_the_highest(open("orders").await.1).await;
}

#[tokio::test]
async fn ordering_on_sqlite() {
    let (db, _dir) = sqlite();
    ordering_scenarios(async |table| {
        let inbox = db
            .inbox(&format!("{table}_inbox"), InboxOptions::default())
            .await
            .unwrap();
        (inbox, db.versions(table).await.unwrap())
    })
    .await;
}

#[tokio::test]
async fn ordering_on_postgres() {
    let Some((db, _guard)) = postgres("ordering_on_postgres").await else {
        return;
    };
    ordering_scenarios(async |table| {
        let inbox = db
            .inbox(&format!("{table}_inbox"), InboxOptions::default())
            .await
            .unwrap();
        (inbox, db.versions(table).await.unwrap())
    })
    .await;
}
