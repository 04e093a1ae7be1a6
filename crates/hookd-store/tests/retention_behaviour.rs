//! The `RetentionStore` contract, on every `Store` implementation: purging the content of
//! settled messages once their retention runs out (never of a message with a delivery still to
//! do), a message's own expiry before the server's window, and expunging content at once.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::{at, first_page, message};
use harness::queue::{app_with_endpoints, claim, delivery, publish, record};
use hookd_core::model::{Application, DeliveryStatus, Endpoint, Message};
use hookd_store::{
    AttemptFilter, EXPUNGED, NewMessage, PurgeCursor, PurgeRequest, Purged, Store, StoreError,
};

const DAY: i64 = 86_400_000;
const WINDOW: i64 = 30 * DAY;

const RECORDS: i64 = 90 * DAY;
const EVENT_IDS: i64 = 365 * DAY;

/// Runs one whole purge pass at `now` (window of 30 days, records kept for ever) in batches of
/// `limit`; returns every batch's report.
async fn pass(store: &dyn Store, now: i64, limit: usize) -> Vec<Purged> {
    pass_deleting(store, now, limit, None).await
}

/// [`pass`], deleting records `records` after their creation (`eventId`s kept a year).
async fn pass_deleting(
    store: &dyn Store,
    now: i64,
    limit: usize,
    records: Option<i64>,
) -> Vec<Purged> {
    let mut batches = Vec::new();
    let mut cursor = Some(PurgeCursor::default());
    while let Some(at_cursor) = cursor {
        let request = PurgeRequest {
            now: at(now),
            window_start: at(now - WINDOW),
            records_before: records.map(|keep| at(now - keep)),
            event_ids_before: at(now - EVENT_IDS),
            limit,
            cursor: at_cursor,
        };
        let batch = store.purge_batch(&request).await.unwrap();
        cursor = batch.next.clone();
        batches.push(batch);
    }
    batches
}

fn purged_in(batches: &[Purged]) -> usize {
    batches.iter().map(|b| b.messages).sum()
}

async fn stored(store: &dyn Store, msg: &Message) -> Message {
    store
        .get_message(&msg.app_id, msg.id.as_str())
        .await
        .unwrap()
        .expect("the message row stays")
}

async fn attempts_of(store: &dyn Store, a: &Application, msg: &Message) -> usize {
    store
        .list_attempts_by_message(&a.id, msg, &AttemptFilter::default(), &first_page(50))
        .await
        .unwrap()
        .items
        .len()
}

/// Publishes at `created` and records one attempt that settles the delivery as `outcome`.
async fn settled(
    store: &dyn Store,
    a: &Application,
    ep: &Endpoint,
    created: i64,
    outcome: DeliveryStatus,
) -> Message {
    let msg = publish(store, a, created).await;
    record(store, &msg, ep, created + 10, outcome, 1, None)
        .await
        .unwrap();
    msg
}

async fn a_settled_message_loses_payload_and_attempts_after_the_window(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let delivered = settled(store, &a, ep, 100, DeliveryStatus::Success).await;
    let failed = settled(store, &a, ep, 200, DeliveryStatus::Fail).await;

    let early = pass(store, 100 + WINDOW - 1, 500).await;
    assert_eq!(purged_in(&early), 0, "inside the window nothing goes");
    assert!(stored(store, &delivered).await.payload.is_some());

    let due = pass(store, 300 + WINDOW, 500).await;
    assert_eq!(purged_in(&due), 2);
    assert_eq!(due.iter().map(|b| b.attempts).sum::<u64>(), 2);
    for msg in [&delivered, &failed] {
        let kept = stored(store, msg).await;
        assert_eq!(kept.payload, None, "the payload is purged");
        assert_eq!(kept.event_type, msg.event_type, "the record stays");
        assert_eq!(attempts_of(store, &a, msg).await, 0, "attempts are purged");
        assert!(
            delivery(store, msg, ep).await.is_some(),
            "where it went stays"
        );
    }

    let again = pass(store, 400 * DAY, 500).await;
    assert_eq!(
        again.iter().map(|b| b.examined).sum::<usize>(),
        0,
        "a purged message is never looked at again"
    );
}

async fn pending_deliveries_keep_their_payload_however_old(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 2).await;
    let (ep, other) = (&eps[0], &eps[1]);
    // Oldest first, so a batch of one meets every kept message before the settled one.
    let in_flight = publish(store, &a, 100).await;
    let claimed = claim(store, 150, 10, 10).await;
    assert_eq!(claimed.len(), 2, "in flight (sending) to both endpoints");
    let waiting = publish(store, &a, 200).await;
    let retrying = publish(store, &a, 300).await;
    record(
        store,
        &retrying,
        ep,
        310,
        DeliveryStatus::Pending,
        1,
        Some(10 * DAY),
    )
    .await
    .unwrap();
    record(
        store,
        &retrying,
        other,
        320,
        DeliveryStatus::Success,
        1,
        None,
    )
    .await
    .unwrap();
    let done = publish(store, &a, 400).await;
    for e in [ep, other] {
        record(store, &done, e, 410, DeliveryStatus::Success, 1, None)
            .await
            .unwrap();
    }

    let years_later = 10 * 365 * DAY;
    let batches = pass(store, years_later, 1).await;
    assert_eq!(
        purged_in(&batches),
        1,
        "only the settled message: {batches:?}"
    );
    assert_eq!(stored(store, &done).await.payload, None);
    for msg in [&waiting, &retrying, &in_flight] {
        assert_eq!(
            stored(store, msg).await.payload,
            msg.payload,
            "a message with a delivery still to do keeps its payload"
        );
    }
    assert_eq!(
        attempts_of(store, &a, &retrying).await,
        2,
        "and its attempts"
    );

    // Once the last delivery settles, the next pass purges it.
    record(
        store,
        &retrying,
        ep,
        years_later,
        DeliveryStatus::Fail,
        2,
        None,
    )
    .await
    .unwrap();
    assert_eq!(purged_in(&pass(store, years_later + 1, 1).await), 1);
    assert_eq!(stored(store, &retrying).await.payload, None);
    assert_eq!(attempts_of(store, &a, &retrying).await, 0);
}

async fn a_messages_own_retention_wins_over_the_window(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let on_window = settled(store, &a, ep, 100, DeliveryStatus::Success).await;
    let short = harness::fixtures::message(&a, "order.shipped", None, None, 200);
    store
        .publish(NewMessage::new(short.clone()).expiring(Some(at(200 + 5 * DAY))))
        .await
        .unwrap();
    let long = harness::fixtures::message(&a, "order.shipped", None, None, 300);
    let created = store
        .publish(NewMessage::new(long.clone()).expiring(Some(at(300 + 90 * DAY))))
        .await
        .unwrap();
    assert_eq!(created.deliveries, 1, "routed as any message");
    for msg in [&short, &long] {
        record(store, msg, ep, 400, DeliveryStatus::Success, 1, None)
            .await
            .unwrap();
    }

    assert_eq!(purged_in(&pass(store, 6 * DAY, 500).await), 1);
    assert_eq!(stored(store, &short).await.payload, None, "5 days, not 30");
    assert!(stored(store, &on_window).await.payload.is_some());

    assert_eq!(purged_in(&pass(store, 31 * DAY, 500).await), 1);
    assert_eq!(stored(store, &on_window).await.payload, None);
    assert_eq!(
        stored(store, &long).await.payload,
        long.payload,
        "90 days, not 30"
    );
    assert_eq!(attempts_of(store, &a, &long).await, 1);

    assert_eq!(purged_in(&pass(store, 91 * DAY, 500).await), 1);
    assert_eq!(stored(store, &long).await.payload, None);
    assert_eq!(attempts_of(store, &a, &long).await, 0);
}

async fn expunging_drops_content_at_once(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let msg = publish(store, &a, 100).await;
    record(store, &msg, ep, 110, DeliveryStatus::Pending, 1, Some(DAY))
        .await
        .unwrap();
    let tried = store
        .list_attempts_by_message(&a.id, &msg, &AttemptFilter::default(), &first_page(1))
        .await
        .unwrap()
        .items
        .remove(0);
    assert_ne!(tried.response, EXPUNGED);

    store
        .expunge_attempt_content(&msg, tried.id.as_str())
        .await
        .unwrap();
    let shown = store
        .get_attempt(&msg, tried.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shown.response, EXPUNGED);
    assert_eq!(shown.response_head, "", "headers go too");
    assert_eq!(shown.response_status_code, tried.response_status_code);

    store.expunge_message_content(&msg).await.unwrap();
    assert_eq!(
        stored(store, &msg).await.payload,
        None,
        "an expunge is asked for: it does not wait for pending deliveries"
    );

    let other = publish(store, &a, 200).await;
    let outcome = store
        .expunge_attempt_content(&other, tried.id.as_str())
        .await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound("attempt"))),
        "another message's attempt: {outcome:?}"
    );
    store.delete_app(&a.id).await.unwrap();
    let outcome = store.expunge_message_content(&other).await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound("message"))),
        "{outcome:?}"
    );
}

async fn records_go_after_their_time_and_event_ids_stay_taken_for_theirs(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let with_event_id = message(&a, "order.shipped", Some("evt-1"), None, 100);
    store
        .publish(NewMessage::new(with_event_id.clone()))
        .await
        .unwrap();
    record(
        store,
        &with_event_id,
        ep,
        110,
        DeliveryStatus::Success,
        1,
        None,
    )
    .await
    .unwrap();
    let pending = publish(store, &a, 150).await;
    let plain = settled(store, &a, ep, 200, DeliveryStatus::Fail).await;
    let sum = |batches: &[Purged], of: fn(&Purged) -> u64| batches.iter().map(of).sum::<u64>();

    let purged = pass_deleting(store, 300 + WINDOW, 1, Some(RECORDS)).await;
    assert_eq!(purged_in(&purged), 2, "content first");
    assert_eq!(
        sum(&purged, |b| b.records as u64),
        0,
        "records stay for their time"
    );

    let early = pass_deleting(store, 100 + RECORDS, 1, Some(RECORDS)).await;
    assert_eq!(
        sum(&early, |b| b.records as u64),
        0,
        "not before their time"
    );

    let due = pass_deleting(store, 300 + RECORDS, 1, Some(RECORDS)).await;
    assert_eq!(sum(&due, |b| b.records as u64), 2, "in batches of one");
    assert_eq!(sum(&due, |b| b.deliveries), 2);
    for gone in [&with_event_id, &plain] {
        let found = store.get_message(&a.id, gone.id.as_str()).await.unwrap();
        assert!(found.is_none(), "the record is deleted");
        assert!(
            delivery(store, gone, ep).await.is_none(),
            "with its delivery"
        );
    }
    assert!(
        store
            .get_message(&a.id, pending.id.as_str())
            .await
            .unwrap()
            .is_some(),
        "a message with a delivery to do keeps its record"
    );

    let again = message(&a, "order.shipped", Some("evt-1"), None, 400 + RECORDS);
    let outcome = store.publish(NewMessage::new(again.clone())).await;
    assert!(
        matches!(outcome, Err(StoreError::Conflict(_))),
        "the deleted record's eventId stays taken: {outcome:?}"
    );
    let (other_app, _) = app_with_endpoints(store, 1).await;
    let elsewhere = message(
        &other_app,
        "order.shipped",
        Some("evt-1"),
        None,
        400 + RECORDS,
    );
    store
        .publish(NewMessage::new(elsewhere.clone()))
        .await
        .unwrap();

    let released = pass_deleting(store, 101 + EVENT_IDS, 1, Some(RECORDS)).await;
    assert_eq!(sum(&released, |b| b.event_ids), 1, "its own year is over");
    let later = message(&a, "order.shipped", Some("evt-1"), None, 102 + EVENT_IDS);
    store.publish(NewMessage::new(later.clone())).await.unwrap();
}

behaviour!(
    a_settled_message_loses_payload_and_attempts_after_the_window,
    pending_deliveries_keep_their_payload_however_old,
    a_messages_own_retention_wins_over_the_window,
    expunging_drops_content_at_once,
    records_go_after_their_time_and_event_ids_stay_taken_for_theirs,
);
