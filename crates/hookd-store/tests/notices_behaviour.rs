//! The `NoticeStore` contract, on every `Store` implementation: one owner holds the turn to
//! send e-mail notices until it runs out, progress is recorded only by the owner, and the
//! operational events are read in order after the last one done.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::at;
use harness::queue::{app_with_endpoints, publish};
use hookd_core::MessageId;
use hookd_core::operations::{EndpointRef, OperationalEvent};
use hookd_store::{NewMessage, Store};

async fn one_owner_holds_the_turn_until_it_runs_out(store: &dyn Store) {
    let start = MessageId::lowest_at(at(1_000));
    let first = store.notice_turn("a", at(0), at(30_000), &start).await;
    assert_eq!(
        first.unwrap(),
        Some(start.clone()),
        "the first turn starts at the start"
    );
    let other = store.notice_turn("b", at(10_000), at(40_000), &start).await;
    assert_eq!(other.unwrap(), None, "a live turn is not taken");
    assert!(
        !store.notices_done("b", &start).await.unwrap(),
        "nor written by another"
    );

    let done = MessageId::lowest_at(at(2_000));
    assert!(store.notices_done("a", &done).await.unwrap());
    let renewed = store.notice_turn("a", at(20_000), at(50_000), &start).await;
    assert_eq!(
        renewed.unwrap(),
        Some(done.clone()),
        "the owner renews and reads its progress"
    );

    let later = MessageId::lowest_at(at(9_000));
    let taken = store.notice_turn("b", at(50_000), at(80_000), &later).await;
    assert_eq!(
        taken.unwrap(),
        Some(done),
        "an expired turn passes on, progress kept"
    );
    assert!(
        !store.notices_done("a", &later).await.unwrap(),
        "the old owner lost it"
    );
}

async fn operational_events_come_in_order_after_the_cursor(store: &dyn Store) {
    let ops = hookd_store::ensure_operations_app(store, at(0))
        .await
        .unwrap();
    let (customer, eps) = app_with_endpoints(store, 1).await;
    let event = |n: i64| {
        OperationalEvent::EndpointEnabled(EndpointRef::new(&customer, &eps[0]))
            .message(&ops.id, at(n))
    };
    let events = [event(100), event(200), event(300)];
    for e in &events {
        store.publish(NewMessage::new(e.clone())).await.unwrap();
    }
    publish(store, &customer, 250).await;

    let after_first = store.operational_events(&events[0].id, 10).await.unwrap();
    let ids: Vec<_> = after_first.iter().map(|m| m.id.clone()).collect();
    assert_eq!(
        ids,
        [events[1].id.clone(), events[2].id.clone()],
        "only the operations app's"
    );
    let limited = store
        .operational_events(&MessageId::lowest_at(at(0)), 1)
        .await
        .unwrap();
    assert_eq!(limited[0].id, events[0].id);
    assert_eq!(limited[0].payload, events[0].payload, "with its payload");
}

behaviour!(
    one_owner_holds_the_turn_until_it_runs_out,
    operational_events_come_in_order_after_the_cursor,
);
