//! PostgreSQL-specific guarantees of publishing in batches: one transaction for concurrent
//! publishes, failing fast while the database is away, one publish task per pool that ends
//! with the store, and new deliveries handed to the publishing process's engine within the
//! room every process leaves. Skipped like the suite's `postgres::` cases when
//! `HOOKD_TEST_POSTGRES_URL` is unset.

mod pg_fixtures;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hookd_core::model::{DeliveryStatus, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::{POSTGRES_URL_VAR, fresh_postgres};
use hookd_store::{ClaimedDelivery, Handoff, HandoffMode, NewMessage, Reserved, StoreError};
use sqlx::{AssertSqlSafe, Connection};

use pg_fixtures::*;

#[tokio::test]
async fn concurrent_publishes_through_any_clone_commit_in_one_transaction() {
    let Some((url, _db)) = fresh_postgres("postgres_only::publish_batch").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let clone = store.clone();
    let owner = app("app_batch");
    store.create_app(&owner).await.unwrap();
    for i in 0..3 {
        store
            .create_endpoint(&endpoint_of(&owner, i, None))
            .await
            .unwrap();
    }
    let mut taken = message_of(&owner, 1);
    taken.event_id = Some("evt-taken".into());
    store.publish(NewMessage::new(taken.clone())).await.unwrap();
    // Taken event ids (in the database, and twice in the batch) are answered each alone and
    // must not cost the others their batch.
    let messages: Vec<Message> = (0..200)
        .map(|i| {
            let mut message = message_of(&owner, 10 + i);
            message.event_id = match i {
                0 => Some("evt-taken".into()),
                1 | 2 => Some("evt-twice".into()),
                _ => None,
            };
            message
        })
        .collect();
    let publishes = messages.iter().enumerate().map(|(i, message)| {
        let handle = if i % 2 == 0 { &store } else { &clone };
        handle.publish(NewMessage::new(message.clone()))
    });
    let outcomes = futures::future::join_all(publishes).await;
    let mut written = Vec::new();
    for (i, (message, outcome)) in messages.iter().zip(outcomes).enumerate() {
        match outcome {
            Ok(created) => {
                assert_eq!(created.deliveries, 3);
                written.push(message.id.as_str());
            }
            Err(StoreError::Conflict(_)) => assert!(i == 0 || i == 2, "{i} refused"),
            Err(other) => panic!("{i}: {other:?}"),
        }
    }
    assert_eq!(written.len(), 198);
    // Rows written by one transaction share its id (`xmin`). The test runtime has one thread,
    // so every publish is queued before the publish task runs: one batch, one transaction,
    // whichever clone each went through. Written alone, they would show 198 ids.
    let transactions: Vec<String> = sqlx::query_scalar(
        "SELECT xmin::text FROM messages WHERE id = ANY($1)
         UNION SELECT xmin::text FROM deliveries WHERE message_id = ANY($1)",
    )
    .bind(&written)
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        transactions.len(),
        1,
        "transactions that wrote the publishes"
    );
    let deliveries: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE message_id = ANY($1)")
            .bind(&written)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(deliveries, 198 * 3);
}

#[tokio::test]
async fn publishes_fail_while_the_database_is_away_and_work_once_it_is_back() {
    let Some((url, db)) = fresh_postgres("postgres_only::publish_outage").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_outage");
    store.create_app(&owner).await.unwrap();
    store
        .create_endpoint(&endpoint_of(&owner, 0, None))
        .await
        .unwrap();
    store
        .publish(NewMessage::new(message_of(&owner, 1)))
        .await
        .unwrap();
    let server = std::env::var(POSTGRES_URL_VAR).unwrap();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let allow = |allowed: bool| {
        let name = db.name();
        format!(r#"ALTER DATABASE "{name}" ALLOW_CONNECTIONS {allowed}"#)
    };
    sqlx::query(AssertSqlSafe(allow(false)))
        .execute(&mut admin)
        .await
        .unwrap();
    // With a timeout, each call returns once its backend is gone.
    sqlx::query("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1")
        .bind(db.name())
        .execute(&mut admin)
        .await
        .unwrap();

    let messages: Vec<Message> = (0..20).map(|i| message_of(&owner, 10 + i)).collect();
    let outcomes = futures::future::join_all(
        messages
            .iter()
            .map(|m| store.publish(NewMessage::new(m.clone()))),
    )
    .await;
    for outcome in outcomes {
        assert!(
            matches!(outcome, Err(StoreError::Unavailable(ref why)) if why.contains("not currently accepting connections")),
            "{outcome:?}"
        );
    }

    sqlx::query(AssertSqlSafe(allow(true)))
        .execute(&mut admin)
        .await
        .unwrap();
    let after = message_of(&owner, 100);
    assert_eq!(
        store
            .publish(NewMessage::new(after.clone()))
            .await
            .unwrap()
            .deliveries,
        1
    );
    for message in &messages {
        assert_eq!(
            store
                .get_message(&owner.id, message.id.as_str())
                .await
                .unwrap(),
            None
        );
    }
}

#[tokio::test]
async fn the_publish_task_ends_with_the_last_clone_of_its_store() {
    let Some((url, db)) = fresh_postgres("postgres_only::publish_task_end").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let clone = store.clone();
    let owner = app("app_task");
    store.create_app(&owner).await.unwrap();
    store
        .publish(NewMessage::new(message_of(&owner, 1)))
        .await
        .unwrap();
    drop(store);
    clone
        .publish(NewMessage::new(message_of(&owner, 2)))
        .await
        .unwrap();
    drop(clone);
    // The task holds the pool's last handle: once the task ends, the pool's connections close.
    let server = std::env::var(POSTGRES_URL_VAR).unwrap();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let connected: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
                .bind(db.name())
                .fetch_one(&mut admin)
                .await
                .unwrap();
        if connected == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{connected} connections outlived the store"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An engine's side of a handoff for these tests: takes a delivery to any endpoint, under a
/// lease until 70 s, within a cap of 3; keeps what it is given and counts the room it held
/// that came back unused.
struct Taker {
    started: std::sync::Mutex<Vec<ClaimedDelivery>>,
    given_back: Arc<AtomicUsize>,
    me: std::sync::Weak<Taker>,
}

/// Room a [`Taker`] held; counted when dropped unused.
struct Room(Arc<AtomicUsize>);

impl Drop for Room {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Handoff for Taker {
    fn reserve(&self, _endpoint: &EndpointId) -> Option<Reserved> {
        let (me, room) = (self.me.upgrade()?, Room(self.given_back.clone()));
        Some(Reserved::new(
            Timestamp::from_millis(70_000),
            move |claimed| {
                std::mem::forget(room);
                me.started.lock().unwrap().push(claimed);
            },
        ))
    }

    fn per_endpoint(&self) -> usize {
        3
    }
}

impl Taker {
    /// A taker of every new delivery `store` writes.
    fn on(store: &PgStore) -> Arc<Self> {
        let taker = Arc::new_cyclic(|me| Self {
            started: std::sync::Mutex::default(),
            given_back: Arc::default(),
            me: me.clone(),
        });
        let weak: std::sync::Weak<dyn Handoff> = Arc::downgrade(&taker) as std::sync::Weak<Self>;
        assert_eq!(store.hand_off_new_deliveries(weak), HandoffMode::Shared);
        taker
    }

    /// The messages of the deliveries handed off, in order.
    fn started(&self) -> Vec<MessageId> {
        let started = self.started.lock().unwrap();
        started.iter().map(|c| c.message.id.clone()).collect()
    }
}

/// A delivery handed to the publishing process's engine counts against its endpoint's cap
/// like a claimed one, in every process: the publish hands off only the room the cap has
/// left after the other processes' attempts, and their claims then find the cap full.
#[tokio::test]
async fn new_deliveries_are_handed_over_only_within_their_endpoints_room_across_processes() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_room").await else {
        return;
    };
    let other = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff");
    let endpoint = endpoint_of(&owner, 1, None);
    queue(&other, &owner, std::slice::from_ref(&endpoint), 2).await;
    assert_eq!(other.claim_due(&claim_at(1_000, 3)).await.unwrap().len(), 2);

    let publisher = PgStore::connect(&url).await.unwrap();
    let taker = Taker::on(&publisher);
    let messages: Vec<Message> = (0..3).map(|i| message_of(&owner, 2_000 + i)).collect();
    let mut queued = Vec::new();
    for message in &messages {
        queued.push(
            publisher
                .publish(NewMessage::new(message.clone()))
                .await
                .unwrap()
                .queued,
        );
    }

    assert_eq!(
        queued,
        [0, 1, 1],
        "one delivery of room was left of the cap of 3"
    );
    assert_eq!(taker.started(), [messages[0].id.clone()]);
    assert_eq!(taker.given_back.load(Ordering::SeqCst), 2);
    let deliveries = publisher
        .list_message_deliveries(&owner.id, &messages[0])
        .await
        .unwrap();
    let handed = &deliveries[0].1;
    assert_eq!(
        (handed.status, handed.next_attempt_at),
        (
            DeliveryStatus::Sending,
            Some(Timestamp::from_millis(70_000))
        )
    );
    let claimed = other.claim_due(&claim_at(2_003, 3)).await.unwrap();
    assert!(
        claimed.is_empty(),
        "claimed past the cap: {}",
        claimed.len()
    );
}

/// A publish handing deliveries over takes its turn under the claims' lock, and counts the
/// deliveries a claim took while it waited: the room it sees is read once the lock is
/// granted.
#[tokio::test]
async fn a_handoff_that_waited_its_turn_counts_the_claims_committed_meanwhile() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_turns").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff_turns");
    queue(&store, &owner, &[endpoint_of(&owner, 1, None)], 5).await;
    let taker = Taker::on(&store);

    let mut turn = a_claim_in_its_turn(&url).await;

    let message = message_of(&owner, 1_000);
    let publish = store.publish(NewMessage::new(message.clone()));
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        sqlx::query("COMMIT").execute(&mut turn).await.unwrap();
    };
    let (created, ()) = tokio::join!(publish, commit_once_waited_for);
    assert_eq!(created.unwrap().queued, 1, "handed off past a full cap");
    assert!(taker.started().is_empty());
}

/// Rate-limited endpoints keep their windows in claims, and an endpoint paused by a 429 gets
/// nothing until the pause ends: their new deliveries are left to claims.
#[tokio::test]
async fn new_deliveries_to_rate_limited_or_paused_endpoints_wait_for_a_claim() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_windows").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff_windows");
    let (plain, throttled, paused) = (
        endpoint_of(&owner, 1, None),
        endpoint_of(&owner, 2, Some(5)),
        endpoint_of(&owner, 3, None),
    );
    queue(
        &store,
        &owner,
        &[plain.clone(), throttled, paused.clone()],
        0,
    )
    .await;
    sqlx::query("UPDATE hookd.endpoints SET next_window_at = 9000 WHERE id = $1")
        .bind(paused.id.as_str())
        .execute(store.pool())
        .await
        .unwrap();
    let taker = Taker::on(&store);

    let message = message_of(&owner, 1_000);
    let created = store
        .publish(NewMessage::new(message.clone()))
        .await
        .unwrap();

    assert_eq!((created.deliveries, created.queued), (3, 2));
    let started = taker.started.lock().unwrap();
    let handed: Vec<&EndpointId> = started.iter().map(|c| &c.endpoint.id).collect();
    assert_eq!(handed, [&plain.id]);
    assert_eq!(taker.given_back.load(Ordering::SeqCst), 2);
}

/// The ordering locks are one per key, whatever the endpoints a keyed message fans out to, and
/// one per strict endpoint: a batch of keyed messages to many endpoints stays far inside
/// PostgreSQL's lock table (`max_locks_per_transaction` per connection).
#[tokio::test]
async fn ordering_locks_are_one_per_key_not_per_endpoint() {
    let Some((url, _db)) = fresh_postgres("postgres_only::ordering_locks").await else {
        return;
    };
    PgStore::connect(&url).await.expect("migrates");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SET search_path = hookd")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    // 100 endpoints x 3 keys, and 2 strict endpoints' ''.
    let mut eps: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for e in 0..100 {
        for k in 0..3 {
            eps.push(format!("ep_{e}"));
            keys.push(format!("key-{k}"));
        }
    }
    for e in ["ep_strict_1", "ep_strict_2"] {
        eps.push(e.into());
        keys.push(String::new());
    }
    sqlx::query("SELECT lock_ordering_keys($1, $2)")
        .bind(&eps)
        .bind(&keys)
        .execute(&mut *tx)
        .await
        .unwrap();
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(held, 5, "three keys and two strict endpoints");
}
