//! The `DeliveryQueue` contract, on every `Store` implementation: recording attempts, alone or
//! in batches, with the endpoint's failure streak, and records that find their delivery gone
//! or their lease over.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::BTreeSet;

use harness::fixtures::{at, message};
use harness::queue::{
    LEASE_MS, app_with_endpoints, attempt, claim, delivery, endpoint_attempts, pair, pairs,
    publish, record,
};
use hookd_core::EndpointId;
use hookd_core::model::{Delivery, DeliveryStatus, Endpoint, Message};
use hookd_store::{AttemptRecord, Recorded, Store, StoreError};

async fn recording_attempts_moves_deliveries_and_keeps_the_failure_streak(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let (m1, m2) = (publish(store, &a, 10).await, publish(store, &a, 11).await);
    claim(store, 20, 10, 10).await;
    // A failure starts the streak and schedules a retry.
    let streak = record(store, &m1, ep, 100, DeliveryStatus::Pending, 1, Some(5_100)).await;
    assert_eq!(streak.unwrap(), Some(at(100)));
    let retry = delivery(store, &m1, ep).await.unwrap();
    assert_eq!(
        (
            retry.status,
            retry.attempt_count,
            retry.next_attempt_at,
            retry.updated_at
        ),
        (DeliveryStatus::Pending, 1, Some(at(5_100)), at(100))
    );
    // Another failure keeps the streak's start.
    let streak = record(store, &m2, ep, 200, DeliveryStatus::Fail, 1, None).await;
    assert_eq!(streak.unwrap(), Some(at(100)));
    let failed = delivery(store, &m2, ep).await.unwrap();
    assert_eq!(
        (failed.status, failed.next_attempt_at),
        (DeliveryStatus::Fail, None)
    );
    // The retry is claimed when due; its success ends the streak and the delivery.
    let retried = claim(store, 5_100, 10, 10).await;
    assert_eq!(pairs(&retried), BTreeSet::from([pair(&m1, ep)]));
    assert_eq!(retried[0].delivery.attempt_count, 1);
    let streak = record(store, &m1, ep, 5_200, DeliveryStatus::Success, 2, None).await;
    assert_eq!(streak.unwrap(), None);
    let done = delivery(store, &m1, ep).await.unwrap();
    assert_eq!(
        (done.status, done.attempt_count, done.next_attempt_at),
        (DeliveryStatus::Success, 2, None)
    );
    // The next failure starts a new streak.
    let m3 = publish(store, &a, 5_300).await;
    let streak = record(
        store,
        &m3,
        ep,
        5_400,
        DeliveryStatus::Pending,
        1,
        Some(9_000),
    )
    .await;
    assert_eq!(streak.unwrap(), Some(at(5_400)));
    // Every attempt is kept with its response head.
    let attempts = endpoint_attempts(store, ep).await;
    assert_eq!(attempts.len(), 4);
    let newest = &attempts[0];
    assert_eq!(
        (newest.message_id.clone(), newest.created_at),
        (m3.id.clone(), at(5_400))
    );
    assert_eq!(newest.response_head, "HTTP/1.1 500\r\nretry-after: 5\r\n");
    assert!(claim(store, 8_999, 10, 10).await.is_empty());
}

async fn enabling_an_endpoint_starts_a_fresh_failure_streak(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let msg = publish(store, &a, 10).await;
    let fail = |at_ms| {
        record(
            store,
            &msg,
            ep,
            at_ms,
            DeliveryStatus::Pending,
            1,
            Some(at_ms),
        )
    };
    assert_eq!(fail(100).await.unwrap(), Some(at(100)));
    // Changing an enabled endpoint keeps its streak.
    let mut changed = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    changed.description = "changed".into();
    store.update_endpoint(&changed).await.unwrap();
    assert_eq!(fail(200).await.unwrap(), Some(at(100)));
    // Disabling shows why and when.
    store
        .disable_endpoint(&ep.id, "failing for 5 days", at(300), &[])
        .await
        .unwrap();
    let disabled = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert!(disabled.disabled);
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("failing for 5 days")
    );
    assert_eq!(disabled.disabled_at, Some(at(300)));
    assert_eq!(disabled.updated_at, at(300));
    assert_eq!(
        disabled,
        Endpoint {
            disabled: true,
            disabled_reason: Some("failing for 5 days".into()),
            disabled_at: Some(at(300)),
            updated_at: at(300),
            ..changed.clone()
        }
    );
    // Updating it while disabled keeps the streak too; enabling it resets it.
    let mut still_disabled = disabled.clone();
    still_disabled.description = "still off".into();
    store.update_endpoint(&still_disabled).await.unwrap();
    assert_eq!(fail(400).await.unwrap(), Some(at(100)));
    let enabled = Endpoint {
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        ..still_disabled
    };
    store.update_endpoint(&enabled).await.unwrap();
    assert_eq!(
        store.get_endpoint(&a.id, ep.id.as_str()).await.unwrap(),
        Some(enabled)
    );
    assert_eq!(fail(500).await.unwrap(), Some(at(500)));
    let ghost = EndpointId::new(at(0));
    assert!(matches!(
        store.disable_endpoint(&ghost, "x", at(600), &[]).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn recording_on_a_deleted_delivery_is_not_found_and_keeps_nothing(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 2).await;
    let msg = publish(store, &a, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 2);
    store.delete_endpoint(&eps[0]).await.unwrap();
    let outcome = record(store, &msg, &eps[0], 30, DeliveryStatus::Success, 1, None).await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound(_))),
        "{outcome:?}"
    );
    // A delivery whose endpoint still exists but which is gone itself (never routed).
    let m2 = message(&a, "order.shipped", None, None, 40);
    let outcome = record(store, &m2, &eps[1], 50, DeliveryStatus::Success, 1, None).await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound(_))),
        "{outcome:?}"
    );
    let page = hookd_store::PageRequest {
        limit: 10,
        cursor: None,
    };
    let kept = store
        .list_attempts_by_endpoint(&eps[1], &Default::default(), &page)
        .await
        .unwrap();
    assert!(kept.items.is_empty());
    // The failed record left the endpoint's streak alone.
    let streak = record(
        store,
        &msg,
        &eps[1],
        60,
        DeliveryStatus::Pending,
        1,
        Some(70),
    )
    .await;
    assert_eq!(streak.unwrap(), Some(at(60)));
}

async fn a_batch_of_records_is_written_together_and_skips_deleted_deliveries(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let msg = publish(store, &a, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 3);
    store.delete_endpoint(&eps[1]).await.unwrap();
    let done = |ep: &Endpoint, status: DeliveryStatus, next: Option<i64>| AttemptRecord {
        attempt: attempt(&msg, ep, 30, status),
        next: Delivery {
            message_id: msg.id.clone(),
            endpoint_id: ep.id.clone(),
            status,
            attempt_count: 1,
            next_attempt_at: next.map(at),
            updated_at: at(30),
            ordering_key: None,
        },
        lease: Some(at(20 + LEASE_MS)),
        hold_until: None,
        events: Vec::new(),
    };
    let recorded = store
        .record_attempts(&[
            done(&eps[2], DeliveryStatus::Pending, Some(90)),
            done(&eps[1], DeliveryStatus::Success, None),
            done(&eps[0], DeliveryStatus::Success, None),
        ])
        .await
        .unwrap();
    // One answer per record, in the batch's order, whatever order the rows were written in.
    assert_eq!(
        recorded,
        vec![
            Recorded::Written {
                failing_since: Some(at(30))
            },
            Recorded::Gone,
            Recorded::Written {
                failing_since: None
            },
        ]
    );
    let retry = delivery(store, &msg, &eps[2]).await.unwrap();
    assert_eq!(
        (retry.status, retry.next_attempt_at),
        (DeliveryStatus::Pending, Some(at(90)))
    );
    let sent = delivery(store, &msg, &eps[0]).await.unwrap();
    assert_eq!(
        (sent.status, sent.next_attempt_at),
        (DeliveryStatus::Success, None)
    );
    assert!(store.record_attempts(&[]).await.unwrap().is_empty());
}

/// A record of `msg` to `ep` made at `at_ms` under the lease ending at `lease`: a success, or
/// a failure due again at `next`.
fn made_at(
    msg: &Message,
    ep: &Endpoint,
    at_ms: i64,
    next: Option<i64>,
    lease: i64,
) -> AttemptRecord {
    let (status, attempt_status) = match next {
        None => (DeliveryStatus::Success, DeliveryStatus::Success),
        Some(_) => (DeliveryStatus::Pending, DeliveryStatus::Fail),
    };
    AttemptRecord {
        attempt: attempt(msg, ep, at_ms, attempt_status),
        next: Delivery {
            message_id: msg.id.clone(),
            endpoint_id: ep.id.clone(),
            status,
            attempt_count: 1,
            next_attempt_at: next.map(at),
            updated_at: at(at_ms),
            ordering_key: None,
        },
        lease: Some(at(lease)),
        hold_until: None,
        events: Vec::new(),
    }
}

async fn a_batch_keeps_the_failure_streak_in_the_order_attempts_were_made(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let m = [
        publish(store, &a, 10).await,
        publish(store, &a, 11).await,
        publish(store, &a, 12).await,
    ];
    assert_eq!(claim(store, 20, 10, 10).await.len(), 3);
    let lease = 20 + LEASE_MS;
    // Made in the order m0 fails at 30, m1 succeeds at 40, m2 fails at 50; batched otherwise.
    let recorded = store
        .record_attempts(&[
            made_at(&m[2], ep, 50, Some(900), lease),
            made_at(&m[0], ep, 30, Some(900), lease),
            made_at(&m[1], ep, 40, None, lease),
        ])
        .await
        .unwrap();
    let streak = |ms: Option<i64>| Recorded::Written {
        failing_since: ms.map(at),
    };
    assert_eq!(
        recorded,
        vec![streak(Some(50)), streak(Some(30)), streak(None)]
    );
    // The success ended the first streak; the one stored began with the failure after it.
    let next = record(store, &m[1], ep, 60, DeliveryStatus::Fail, 2, None).await;
    assert_eq!(next.unwrap(), Some(at(50)));
}

async fn a_record_under_a_lease_that_ran_out_only_logs_its_attempt(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let msg = publish(store, &a, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 1);
    // The first claimer stalls past its lease, and the delivery is claimed again.
    let (first, second) = (20 + LEASE_MS, 20 + 2 * LEASE_MS);
    assert_eq!(claim(store, first, 10, 10).await.len(), 1);
    // The stalled claimer's failure: logged, but neither the delivery nor the streak moves.
    let stale = made_at(&msg, ep, first + 5, Some(900), first);
    assert_eq!(
        store.record_attempts(&[stale]).await.unwrap(),
        [Recorded::Stale]
    );
    let held = delivery(store, &msg, ep).await.unwrap();
    assert_eq!(
        (held.status, held.next_attempt_at),
        (DeliveryStatus::Sending, Some(at(second)))
    );
    // In one batch, the stalled claimer's later success and the current claim's failure: the
    // current claim's decides, and its streak starts with its own failure.
    let recorded = store
        .record_attempts(&[
            made_at(&msg, ep, first + 20, None, first),
            made_at(&msg, ep, first + 10, Some(900), second),
        ])
        .await
        .unwrap();
    assert_eq!(
        recorded,
        [
            Recorded::Stale,
            Recorded::Written {
                failing_since: Some(at(first + 10))
            }
        ]
    );
    let retry = delivery(store, &msg, ep).await.unwrap();
    assert_eq!(
        (retry.status, retry.next_attempt_at, retry.updated_at),
        (DeliveryStatus::Pending, Some(at(900)), at(first + 10))
    );
    // Every attempt was made, so every one is in the log.
    assert_eq!(endpoint_attempts(store, ep).await.len(), 3);
}

behaviour!(
    recording_attempts_moves_deliveries_and_keeps_the_failure_streak,
    enabling_an_endpoint_starts_a_fresh_failure_streak,
    recording_on_a_deleted_delivery_is_not_found_and_keeps_nothing,
    a_batch_of_records_is_written_together_and_skips_deleted_deliveries,
    a_batch_keeps_the_failure_streak_in_the_order_attempts_were_made,
    a_record_under_a_lease_that_ran_out_only_logs_its_attempt,
);
