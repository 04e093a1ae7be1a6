//! The `DeliveryQueue` contract, on every `Store` implementation: claiming due deliveries
//! within limits and leases, recording attempts with the endpoint's failure streak, disabling,
//! resending and recovering.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::BTreeSet;

use harness::fixtures::{app, at, endpoint, message};
use harness::queue::{
    LEASE_MS, app_with_endpoints, attempt, claim, delivery, endpoint_attempts, pair, pairs,
    publish, record, request,
};
use hookd_core::model::{Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::{AppId, EndpointId, MessageId};
use hookd_store::{ApiToken, AttemptRecord, NewMessage, Recorded, Store, StoreError};

async fn a_claim_takes_the_oldest_due_within_its_limits(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let mut msgs = Vec::new();
    for i in 1..=6 {
        msgs.push(publish(store, &a, i * 10).await);
    }
    // Due at 35: messages 0, 1 and 2 to each endpoint; two per endpoint, the oldest.
    let first = claim(store, 35, 100, 2).await;
    let expected: BTreeSet<_> = eps
        .iter()
        .flat_map(|e| [pair(&msgs[0], e), pair(&msgs[1], e)])
        .collect();
    assert_eq!(pairs(&first), expected);
    for claimed in &first {
        assert_eq!(claimed.delivery.status, DeliveryStatus::Sending);
        assert_eq!(claimed.delivery.next_attempt_at, Some(at(35 + LEASE_MS)));
        assert_eq!(claimed.delivery.updated_at, at(35));
        assert_eq!(claimed.delivery.attempt_count, 0);
        assert!(!claimed.manual);
        let msg = msgs.iter().find(|m| m.id == claimed.delivery.message_id);
        assert_eq!(Some(&claimed.message), msg);
        let ep = eps.iter().find(|e| e.id == claimed.delivery.endpoint_id);
        assert_eq!(Some(&claimed.endpoint), ep);
    }
    let stored = delivery(store, &msgs[0], &eps[0]).await.unwrap();
    assert_eq!(stored.status, DeliveryStatus::Sending);
    // The rest of what is due; then nothing.
    let second = claim(store, 35, 100, 2).await;
    let expected: BTreeSet<_> = eps.iter().map(|e| pair(&msgs[2], e)).collect();
    assert_eq!(pairs(&second), expected);
    assert!(claim(store, 35, 100, 2).await.is_empty());
    // `limit` caps the whole claim, oldest due first: message 3 everywhere, then one of 4.
    let limited = claim(store, 100, 4, 10).await;
    assert_eq!(limited.len(), 4);
    let of = |m: &Message| limited.iter().filter(|c| c.message.id == m.id).count();
    assert_eq!((of(&msgs[3]), of(&msgs[4]), of(&msgs[5])), (3, 1, 0));
    // Nothing due yet is claimed: message 5 (60) is due later than 55.
    let early = claim(store, 55, 100, 10).await;
    assert!(
        early.iter().all(|c| c.message.id == msgs[4].id),
        "{early:?}"
    );
    assert_eq!(early.len(), 2);
    assert!(claim(store, 55, 100, 10).await.is_empty());
}

async fn disabled_and_skipped_endpoints_are_not_claimed(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let msg = publish(store, &a, 10).await;
    store
        .disable_endpoint(&eps[2].id, "gone", at(15), &[])
        .await
        .unwrap();
    let skipping = store
        .claim_due(&request(20, 10, 10, &[&eps[1]]))
        .await
        .unwrap();
    assert_eq!(pairs(&skipping), BTreeSet::from([pair(&msg, &eps[0])]));
    let rest = claim(store, 20, 10, 10).await;
    assert_eq!(pairs(&rest), BTreeSet::from([pair(&msg, &eps[1])]));
    assert!(claim(store, 20, 10, 10).await.is_empty());
    // The disabled endpoint's delivery waited, pending, and is claimed once it is enabled.
    let waiting = delivery(store, &msg, &eps[2]).await.unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
    let mut enabled = store
        .get_endpoint(&a.id, eps[2].id.as_str())
        .await
        .unwrap()
        .unwrap();
    enabled.disabled = false;
    enabled.disabled_reason = None;
    enabled.disabled_at = None;
    store.update_endpoint(&enabled).await.unwrap();
    let after = claim(store, 20, 10, 10).await;
    assert_eq!(pairs(&after), BTreeSet::from([pair(&msg, &eps[2])]));
}

async fn a_claim_is_leased_until_its_lease_ends(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let msg = publish(store, &a, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 1);
    // Still leased just before the lease ends, for any claimer.
    assert!(claim(store, 20 + LEASE_MS - 1, 10, 10).await.is_empty());
    // A claimer that died lets the lease run out: the delivery is due again.
    let again = claim(store, 20 + LEASE_MS, 10, 10).await;
    assert_eq!(pairs(&again), BTreeSet::from([pair(&msg, &eps[0])]));
    assert_eq!(again[0].delivery.attempt_count, 0);
    assert_eq!(
        again[0].delivery.next_attempt_at,
        Some(at(20 + 2 * LEASE_MS))
    );
}

async fn empty_limits_claim_nothing(store: &dyn Store) {
    let (a, _) = app_with_endpoints(store, 1).await;
    publish(store, &a, 10).await;
    assert!(claim(store, 20, 0, 10).await.is_empty());
    assert!(claim(store, 20, 10, 0).await.is_empty());
    assert_eq!(claim(store, 20, 10, 10).await.len(), 1);
}

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

async fn resend_queues_one_manual_attempt_unless_one_is_in_flight(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let shipped = endpoint(&a, Some("shipped"), Some(&["order.shipped"]), None);
    let paid = endpoint(&a, Some("paid"), Some(&["order.paid"]), None);
    for ep in [&shipped, &paid] {
        store.create_endpoint(ep).await.unwrap();
    }
    let msg = publish(store, &a, 10).await;
    assert!(delivery(store, &msg, &paid).await.is_none());
    // A message never routed to an endpoint gets a delivery there, due at once, manual.
    assert!(store.resend(&msg.id, &paid.id, at(50)).await.unwrap());
    let created = delivery(store, &msg, &paid).await.unwrap();
    assert_eq!(
        (
            created.status,
            created.attempt_count,
            created.next_attempt_at
        ),
        (DeliveryStatus::Pending, 0, Some(at(50)))
    );
    let claimed = claim(store, 50, 10, 10).await;
    let manual: BTreeSet<_> = claimed
        .iter()
        .map(|c| (c.endpoint.id.clone(), c.manual))
        .collect();
    assert_eq!(
        manual,
        BTreeSet::from([(shipped.id.clone(), false), (paid.id.clone(), true)])
    );
    // In flight: left alone.
    assert!(!store.resend(&msg.id, &shipped.id, at(60)).await.unwrap());
    let sending = delivery(store, &msg, &shipped).await.unwrap();
    assert_eq!(
        (sending.status, sending.next_attempt_at),
        (DeliveryStatus::Sending, Some(at(50 + LEASE_MS)))
    );
    // Failed for good, then resent: pending again with its attempt count kept, manual.
    record(store, &msg, &shipped, 70, DeliveryStatus::Fail, 1, None)
        .await
        .unwrap();
    assert!(store.resend(&msg.id, &shipped.id, at(80)).await.unwrap());
    let requeued = delivery(store, &msg, &shipped).await.unwrap();
    assert_eq!(
        (
            requeued.status,
            requeued.attempt_count,
            requeued.next_attempt_at
        ),
        (DeliveryStatus::Pending, 1, Some(at(80)))
    );
    let again = claim(store, 80, 10, 10).await;
    assert_eq!(pairs(&again), BTreeSet::from([pair(&msg, &shipped)]));
    assert!(again[0].manual);
    // Recording the attempt clears the manual flag.
    record(
        store,
        &msg,
        &shipped,
        90,
        DeliveryStatus::Pending,
        2,
        Some(100),
    )
    .await
    .unwrap();
    let scheduled = claim(store, 100, 10, 10).await;
    assert_eq!(scheduled.len(), 1);
    assert!(!scheduled[0].manual);
    // Unknown message or endpoint.
    let unknown_message = store
        .resend(&MessageId::new(at(0)), &shipped.id, at(100))
        .await;
    assert!(
        matches!(unknown_message, Err(StoreError::NotFound("message"))),
        "{unknown_message:?}"
    );
    let unknown_endpoint = store
        .resend(&msg.id, &EndpointId::new(at(0)), at(100))
        .await;
    assert!(
        matches!(unknown_endpoint, Err(StoreError::NotFound("endpoint"))),
        "{unknown_endpoint:?}"
    );
}

async fn recover_requeues_failed_deliveries_of_messages_in_the_window(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 2).await;
    let (ep, other) = (&eps[0], &eps[1]);
    let mut msgs = Vec::new();
    for created in [100, 200, 300, 400] {
        msgs.push(publish(store, &a, created).await);
    }
    for m in &msgs[..3] {
        record(store, m, ep, 500, DeliveryStatus::Fail, 10, None)
            .await
            .unwrap();
    }
    record(store, &msgs[3], ep, 500, DeliveryStatus::Success, 1, None)
        .await
        .unwrap();
    record(store, &msgs[1], other, 500, DeliveryStatus::Fail, 10, None)
        .await
        .unwrap();
    // Messages created in [200, 400): the second and third.
    let recovered = store
        .recover(&ep.id, at(200), Some(at(400)), at(1_000))
        .await
        .unwrap();
    assert_eq!(recovered, 2);
    for m in &msgs[1..3] {
        let d = delivery(store, m, ep).await.unwrap();
        assert_eq!(
            (d.status, d.attempt_count, d.next_attempt_at, d.updated_at),
            (DeliveryStatus::Pending, 0, Some(at(1_000)), at(1_000))
        );
    }
    let status = |d: Option<Delivery>| d.unwrap().status;
    assert_eq!(
        status(delivery(store, &msgs[0], ep).await),
        DeliveryStatus::Fail
    );
    assert_eq!(
        status(delivery(store, &msgs[3], ep).await),
        DeliveryStatus::Success
    );
    assert_eq!(
        status(delivery(store, &msgs[1], other).await),
        DeliveryStatus::Fail
    );
    // Recovered deliveries are scheduled ones, not manual.
    let claimed = store
        .claim_due(&request(1_000, 10, 10, &[other]))
        .await
        .unwrap();
    assert_eq!(
        pairs(&claimed),
        BTreeSet::from([pair(&msgs[1], ep), pair(&msgs[2], ep)])
    );
    assert!(claimed.iter().all(|c| !c.manual));
    // Open-ended: everything failed since the start; sending ones are not failed.
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(2_000)).await.unwrap(),
        1
    );
    assert_eq!(
        status(delivery(store, &msgs[0], ep).await),
        DeliveryStatus::Pending
    );
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(2_000)).await.unwrap(),
        0
    );
}

async fn recover_leaves_messages_whose_payload_was_expunged(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let (kept, expunged) = (publish(store, &a, 100).await, publish(store, &a, 200).await);
    for m in [&kept, &expunged] {
        record(store, m, ep, 500, DeliveryStatus::Fail, 10, None)
            .await
            .unwrap();
    }
    store.expunge_message_content(&expunged).await.unwrap();
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(1_000)).await.unwrap(),
        1
    );
    let status = |d: Option<Delivery>| d.unwrap().status;
    assert_eq!(
        status(delivery(store, &kept, ep).await),
        DeliveryStatus::Pending
    );
    assert_eq!(
        status(delivery(store, &expunged, ep).await),
        DeliveryStatus::Fail
    );
}

async fn a_missing_parent_is_not_found(store: &dyn Store) {
    let ghost = app(None, 0);
    let on_ghost = store
        .create_endpoint(&endpoint(&ghost, None, None, None))
        .await;
    assert!(
        matches!(on_ghost, Err(StoreError::NotFound("application"))),
        "{on_ghost:?}"
    );
    let published = store
        .publish(NewMessage::new(message(
            &ghost,
            "order.shipped",
            None,
            None,
            10,
        )))
        .await;
    assert!(
        matches!(published, Err(StoreError::NotFound("application"))),
        "{published:?}"
    );
    let token = ApiToken {
        id: "tok_ghost".into(),
        token_hash: "ef".repeat(32),
        app_id: Some(AppId::new(at(0))),
        created_at: at(0),
        ..ApiToken::default()
    };
    let created = store.create_token(&token).await;
    assert!(
        matches!(created, Err(StoreError::NotFound("application"))),
        "{created:?}"
    );
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

async fn a_scheduled_message_is_claimed_only_once_due(store: &dyn Store) {
    let (a, eps) = harness::queue::app_with_endpoints(store, 2).await;
    let msg = message(&a, "order.shipped", None, None, 100);
    let created = store
        .publish(
            NewMessage::new(Message {
                deliver_at: Some(at(5_000)),
                ..msg.clone()
            })
            .expiring(Some(at(9_000_000))),
        )
        .await
        .unwrap();
    assert_eq!(
        (created.deliveries, created.queued),
        (2, 2),
        "all wait, none handed off"
    );
    let stored = store.get_message(&a.id, msg.id.as_str()).await.unwrap();
    assert_eq!(stored.and_then(|m| m.deliver_at), Some(at(5_000)));
    assert!(
        claim(store, 4_999, 10, 10).await.is_empty(),
        "not before its time"
    );
    for ep in &eps {
        let waiting = harness::queue::delivery(store, &msg, ep).await.unwrap();
        assert_eq!(waiting.status, DeliveryStatus::Pending);
        assert_eq!(waiting.next_attempt_at, Some(at(5_000)));
    }
    assert_eq!(claim(store, 5_000, 10, 10).await.len(), 2, "then both");
}

behaviour!(
    a_scheduled_message_is_claimed_only_once_due,
    a_claim_takes_the_oldest_due_within_its_limits,
    disabled_and_skipped_endpoints_are_not_claimed,
    a_claim_is_leased_until_its_lease_ends,
    empty_limits_claim_nothing,
    recording_attempts_moves_deliveries_and_keeps_the_failure_streak,
    enabling_an_endpoint_starts_a_fresh_failure_streak,
    resend_queues_one_manual_attempt_unless_one_is_in_flight,
    recover_requeues_failed_deliveries_of_messages_in_the_window,
    recover_leaves_messages_whose_payload_was_expunged,
    a_missing_parent_is_not_found,
    recording_on_a_deleted_delivery_is_not_found_and_keeps_nothing,
    a_batch_of_records_is_written_together_and_skips_deleted_deliveries,
    a_batch_keeps_the_failure_streak_in_the_order_attempts_were_made,
    a_record_under_a_lease_that_ran_out_only_logs_its_attempt,
);
