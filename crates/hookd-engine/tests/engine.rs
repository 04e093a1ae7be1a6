//! The delivery engine end to end: a real SQLite store, real HTTP receivers on loopback, and a
//! clock the test moves, so schedules spanning days run in moments.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use common::{Harness, Receiver, SECRET};
use hookd_core::Clock;
use hookd_core::model::DeliveryStatus;
use hookd_engine::EngineConfig;
use hookd_engine::http::ssrf::AddressPolicy;
use hookd_store::{AttemptFilter, NewMessage, PageRequest};
use webhook_signature::{Secret, Verifier};

/// A receiver answering `status` to each request once the test adds a permit to the gate.
async fn gated_receiver(status: StatusCode) -> (Receiver, Arc<tokio::sync::Semaphore>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let receiver = Receiver::start(move |_| {
        let held = held.clone();
        async move {
            let _ = held.acquire().await;
            status
        }
    })
    .await;
    (receiver, gate)
}

fn all() -> PageRequest {
    PageRequest {
        limit: 100,
        cursor: None,
    }
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_three_requests_with_one_id_on_the_schedule() {
    let receiver = Receiver::failing_first(2, StatusCode::INTERNAL_SERVER_ERROR).await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.publish(r#"{"orderId": 1003}"#).await;

    let status = h.wait_for_attempts(&message, &endpoint, 1).await;
    assert_eq!(status, DeliveryStatus::Pending);
    h.advance(Duration::from_millis(5_500)); // 5 s + at most 10 % jitter
    let status = h.wait_for_attempts(&message, &endpoint, 2).await;
    assert_eq!(status, DeliveryStatus::Pending);
    h.advance(Duration::from_secs(330)); // 5 min + at most 10 % jitter
    receiver.wait_for(3).await;
    h.wait_for_status(&message, &endpoint, DeliveryStatus::Success)
        .await;

    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    let ids: Vec<_> = requests
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(
        ids,
        vec![message.id.to_string(); 3],
        "one webhook-id on every attempt"
    );
    let times: Vec<i64> = requests
        .iter()
        .map(|r| r.header("webhook-timestamp").parse().unwrap())
        .collect();
    assert!(
        (5..=6).contains(&(times[1] - times[0])),
        "first retry after about 5 s: {times:?}"
    );
    assert!(
        (300..=330).contains(&(times[2] - times[1])),
        "second retry after about 5 min: {times:?}"
    );
    for (request, time) in requests.iter().zip(&times) {
        assert_eq!(
            &request.body[..],
            br#"{"orderId": 1003}"#,
            "the stored bytes, unchanged"
        );
        let verifier = Verifier::new(Secret::parse(SECRET).unwrap()).now(*time as u64);
        let headers = [
            ("webhook-id", request.header("webhook-id")),
            ("webhook-timestamp", request.header("webhook-timestamp")),
            ("webhook-signature", request.header("webhook-signature")),
        ];
        verifier
            .verify(&request.body, headers)
            .expect("every attempt is signed");
    }
    let attempts = h
        .store
        .list_attempts_by_message(&h.app.id, &message, &AttemptFilter::default(), &all())
        .await
        .unwrap();
    let codes: Vec<_> = attempts
        .items
        .iter()
        .map(|a| a.response_status_code)
        .collect();
    assert_eq!(
        codes,
        vec![204, 500, 500],
        "every attempt is recorded, newest first"
    );
}

#[tokio::test]
async fn a_slow_endpoint_does_not_delay_another() {
    let answered_slowly = Arc::new(AtomicUsize::new(0));
    let counter = answered_slowly.clone();
    let slow = Receiver::start(move |_| {
        let counter = counter.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            counter.fetch_add(1, Ordering::SeqCst);
            StatusCode::OK
        }
    })
    .await;
    let fast = Receiver::always(StatusCode::OK).await;
    let h = Harness::start(EngineConfig {
        workers: 16,
        ..Harness::config()
    })
    .await;
    let mut slow_endpoint = h.endpoint(&slow.url).await;
    slow_endpoint.event_types = Some(vec!["slow".into()]);
    slow_endpoint.timeout_secs = Some(30);
    h.store.update_endpoint(&slow_endpoint).await.unwrap();
    let mut fast_endpoint = h.endpoint(&fast.url).await;
    fast_endpoint.event_types = Some(vec!["fast".into()]);
    h.store.update_endpoint(&fast_endpoint).await.unwrap();

    for i in 0..100 {
        h.publish_typed("slow", &format!(r#"{{"n": {i}}}"#)).await;
    }
    slow.wait_for(4).await;
    for i in 0..20 {
        h.publish_typed("fast", &format!(r#"{{"n": {i}}}"#)).await;
    }
    fast.wait_for(20).await;
    assert_eq!(
        answered_slowly.load(Ordering::SeqCst),
        0,
        "the fast endpoint got all 20 while the slow one had answered none"
    );
    assert_eq!(
        slow.count(),
        4,
        "the slow endpoint holds only its concurrency cap of workers"
    );
}

#[tokio::test]
async fn an_endpoints_own_timeout_cuts_its_attempts_short() {
    // Answered well inside the engine's timeout (15 s), but after the endpoint's own.
    let receiver = Receiver::start(|_| async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        StatusCode::NO_CONTENT
    })
    .await;
    let h = Harness::start(Harness::config()).await;
    let mut endpoint = h.endpoint(&receiver.url).await;
    endpoint.timeout_secs = Some(1);
    h.store.update_endpoint(&endpoint).await.unwrap();

    let message = h.publish("{}").await;
    let status = h.wait_for_attempts(&message, &endpoint, 1).await;
    assert_eq!(status, DeliveryStatus::Pending, "the attempt timed out");
}

#[tokio::test]
async fn an_endpoint_answering_429_gets_no_new_work_for_a_while() {
    let receiver = Receiver::failing_first(1, StatusCode::TOO_MANY_REQUESTS).await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let told = h.publish("{}").await;
    h.wait_for_attempts(&told, &endpoint, 1).await;

    // Published once the 429 is recorded: without a pause it would go out at once.
    let next = h.publish("{}").await;
    h.wait_for_status(&next, &endpoint, DeliveryStatus::Success)
        .await;
    let arrivals = receiver.requests();
    let waited = arrivals[1].at - arrivals[0].at;
    assert!(
        waited >= Duration::from_secs(1), // the pause when no Retry-After says
        "the next message went out {waited:?} after the 429"
    );
}

#[tokio::test]
async fn a_delivery_that_waited_out_its_lease_is_given_back_not_sent_twice() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let h = Harness::start(Harness::config()).await;
    let mut endpoint = h.endpoint(&receiver.url).await;
    endpoint.throttle_rate = Some(1);
    h.store.update_endpoint(&endpoint).await.unwrap();
    let first = h.publish("{}").await;
    let second = h.publish("{}").await;
    h.wait_for_attempts(&first, &endpoint, 1).await;

    // The second waits a second for the rate limit. Its lease ends meanwhile, and the next
    // claim takes it again: that claim's attempt is the one made.
    h.advance(EngineConfig::default().lease + Duration::from_secs(1));
    h.wait_for_status(&second, &endpoint, DeliveryStatus::Success)
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await; // a second copy comes a second later
    let ids: Vec<_> = receiver
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(ids, [first.id.to_string(), second.id.to_string()]);
}

/// On PostgreSQL a delivery may wait for room another process's attempts hold, and their
/// records free it without waking anyone. An engine whose last claim found nothing looks again
/// shortly after its own attempts finish, rather than at its next poll an hour away.
#[tokio::test]
async fn a_delivery_waiting_for_room_another_process_held_goes_out_without_a_poll() {
    let (receiver, gate) = gated_receiver(StatusCode::OK).await;
    let config = EngineConfig {
        endpoint_max_concurrency: 1,
        poll_interval: Duration::from_secs(3_600),
        ..Harness::config()
    };
    let Some(h) = Harness::start_on_postgres("engine::room_held_elsewhere", config.clone()).await
    else {
        return;
    };
    let other = h.another_process(config).await;
    let endpoint = h.endpoint(&receiver.url).await;
    // The first message goes to this process's engine as it is written (no wake-up needed),
    // and holds the endpoint's one slot; the other process writes the second and finds no
    // room for it.
    let first = h.message("order.shipped", "{}");
    assert_eq!(
        h.store
            .publish(NewMessage::new(first.clone()))
            .await
            .unwrap()
            .queued,
        0
    );
    receiver.wait_for(1).await;
    let second = h.message("order.shipped", "{}");
    assert_eq!(
        other
            .publish(NewMessage::new(second.clone()))
            .await
            .unwrap()
            .queued,
        1
    );

    gate.add_permits(2);
    h.wait_for_status(&first, &endpoint, DeliveryStatus::Success)
        .await;
    h.wait_for_status(&second, &endpoint, DeliveryStatus::Success)
        .await;
}

/// An answered attempt waiting for its record gives its delivery's place back at once: a new
/// message published meanwhile is still taken as it is written, not left to a claim. What has
/// been sent and not recorded stays within twice the workers: a crash sends no more again.
#[tokio::test]
async fn records_held_up_leave_new_deliveries_taken_as_written_and_sends_bounded() {
    use sqlx::Connection as _;

    let (receiver, gate) = gated_receiver(StatusCode::OK).await;
    let config = EngineConfig {
        workers: 2,
        poll_interval: Duration::from_secs(3_600),
        ..Harness::config()
    };
    let Some(h) = Harness::start_on_postgres("engine::records_held_up", config).await else {
        return;
    };
    let endpoint = h.endpoint(&receiver.url).await;
    let taken_as_written = |created: hookd_store::CreatedMessage| created.queued == 0;
    let first = h.message("order.shipped", "{}");
    let created = h.store.publish(NewMessage::new(first.clone())).await;
    assert!(taken_as_written(created.unwrap()));
    receiver.wait_for(1).await;

    // Its record waits for this transaction's lock on its delivery, and every later record
    // waits behind it.
    let url = h.postgres_url.as_deref().unwrap();
    let mut holder = sqlx::PgConnection::connect(url).await.unwrap();
    let mut held = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM hookd.deliveries WHERE message_id = $1 FOR UPDATE")
        .bind(first.id.as_str())
        .execute(&mut *held)
        .await
        .unwrap();
    gate.add_permits(1_000);

    // Four unrecorded attempts (twice the workers) hold every place: the fifth message is
    // taken (its delivery held, waiting for a place) but not sent. Holding each answered
    // attempt's delivery until its record, as the tickets did, refused every one from the
    // fifth on: the engine's four tickets were all held.
    let mut published = vec![first.clone()];
    let mut taken_waiting = false;
    for _ in 0..50 {
        let message = h.message("order.shipped", "{}");
        let created = h.store.publish(NewMessage::new(message.clone())).await;
        published.push(message);
        if published.len() > 4 && taken_as_written(created.unwrap()) {
            taken_waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        taken_waiting,
        "no message published after the fourth was taken as written"
    );
    receiver.wait_for(4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.count(),
        4,
        "sent while four attempts waited for their records"
    );

    held.rollback().await.unwrap();
    for message in &published {
        h.wait_for_status(message, &endpoint, DeliveryStatus::Success)
            .await;
    }
    assert_eq!(receiver.count(), published.len(), "each message sent once");
}

#[tokio::test]
async fn gone_disables_the_endpoint_and_its_other_deliveries_wait() {
    // The first request is answered only once the second message waits behind it.
    let (receiver, gate) = gated_receiver(StatusCode::GONE).await;
    let h = Harness::start(EngineConfig {
        endpoint_max_concurrency: 1,
        // No poll between the 410's record and the endpoint's disabling.
        poll_interval: Duration::from_secs(3_600),
        ..Harness::config()
    })
    .await;
    let endpoint = h.endpoint(&receiver.url).await;
    let first = h.publish("{}").await;
    receiver.wait_for(1).await;
    // Taken into the endpoint's lane as it is written, behind the first.
    let other = h.publish("{}").await;
    gate.add_permits(1);

    h.wait_for_status(&first, &endpoint, DeliveryStatus::Fail)
        .await;
    let stored = h.wait_until_disabled(&endpoint).await;
    assert!(stored.disabled_reason.unwrap().contains("410"));
    let later = h.publish("{}").await;
    h.advance(Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        receiver.count(),
        1,
        "nothing more is sent to a disabled endpoint"
    );
    assert_eq!(
        h.status(&other, &endpoint).await,
        DeliveryStatus::Pending,
        "its other delivery waits (to be recovered once it is enabled again)"
    );
    assert!(
        h.store
            .list_message_deliveries(&h.app.id, &later)
            .await
            .unwrap()
            .is_empty(),
        "a disabled endpoint gets no new deliveries"
    );
}

#[tokio::test]
async fn an_exhausted_delivery_fails_and_recover_sends_it_again() {
    let healthy = Arc::new(AtomicUsize::new(0));
    let flag = healthy.clone();
    let receiver = Receiver::start(move |_| {
        let ok = flag.load(Ordering::SeqCst) == 1;
        async move {
            if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    })
    .await;
    let schedule = hookd_engine::RetrySchedule::parse("0,10s").unwrap();
    let h = Harness::start(EngineConfig {
        schedule,
        ..Harness::config()
    })
    .await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.publish("{}").await;
    let status = h.wait_for_attempts(&message, &endpoint, 1).await;
    assert_eq!(status, DeliveryStatus::Pending);
    h.advance(Duration::from_secs(11));
    let status = h.wait_for_attempts(&message, &endpoint, 2).await;
    assert_eq!(
        status,
        DeliveryStatus::Fail,
        "two attempts exhaust the schedule"
    );

    healthy.store(1, Ordering::SeqCst);
    let recovered = h
        .store
        .recover(&endpoint.id, message.created_at, None, h.clock.now())
        .await
        .unwrap();
    assert_eq!(recovered, 1);
    h.wake.notify_one();
    h.wait_for_status(&message, &endpoint, DeliveryStatus::Success)
        .await;
    assert_eq!(receiver.count(), 3);
    let ids: Vec<_> = receiver
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert!(ids.iter().all(|id| id == message.id.as_str()));
}

#[tokio::test]
async fn an_endpoint_failing_for_five_days_is_disabled() {
    let receiver = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let first = h.publish("{}").await;
    h.wait_for_attempts(&first, &endpoint, 1).await;
    h.clock.advance(Duration::from_secs(5 * 86_400 - 1));
    let almost = h.publish("{}").await;
    h.wait_for_attempts(&almost, &endpoint, 1).await;
    let stored = h.store.get_endpoint(&h.app.id, endpoint.id.as_str());
    let stored = stored.await.unwrap().unwrap();
    assert!(!stored.disabled, "a second short of 5 days is not 5 days");
    h.clock.advance(Duration::from_secs(1));
    let second = h.publish("{}").await;
    receiver.wait_for(3).await;
    let stored = h.wait_until_disabled(&endpoint).await;
    assert!(stored.disabled_reason.unwrap().contains("5 days"));
    // Its deliveries wait (nothing is lost) rather than fail.
    h.wait_for_status(&second, &endpoint, DeliveryStatus::Pending)
        .await;
}

#[tokio::test]
async fn a_queued_delivery_whose_payload_is_expunged_fails_once_instead_of_for_days() {
    let receiver = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.publish("{}").await;
    let status = h.wait_for_attempts(&message, &endpoint, 1).await;
    assert_eq!(status, DeliveryStatus::Pending);

    h.store.expunge_message_content(&message).await.unwrap();
    h.advance(Duration::from_millis(5_500)); // 5 s + at most 10 % jitter
    let status = h.wait_for_attempts(&message, &endpoint, 2).await;

    assert_eq!(
        status,
        DeliveryStatus::Fail,
        "nothing left to send: failed now, not retried on the schedule"
    );
    assert_eq!(receiver.count(), 1, "the second attempt sent nothing");
    let attempts = h
        .store
        .list_attempts_by_message(&h.app.id, &message, &AttemptFilter::default(), &all())
        .await
        .unwrap();
    assert_eq!(attempts.items[0].response, "the payload was expunged");
}

#[tokio::test]
async fn a_resend_goes_out_with_the_same_id_as_a_manual_attempt() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.publish(r#"{"a": 1}"#).await;
    h.wait_for_status(&message, &endpoint, DeliveryStatus::Success)
        .await;
    h.clock.advance(Duration::from_secs(60)); // the manual attempt sorts after the first
    assert!(
        h.store
            .resend(&message.id, &endpoint.id, h.clock.now())
            .await
            .unwrap()
    );
    h.wake.notify_one();
    receiver.wait_for(2).await;
    h.wait_for_status(&message, &endpoint, DeliveryStatus::Success)
        .await;
    let requests = receiver.requests();
    assert_eq!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id")
    );
    let attempts = h
        .store
        .list_attempts_by_message(&h.app.id, &message, &AttemptFilter::default(), &all())
        .await
        .unwrap();
    assert_eq!(
        attempts.items[0].trigger_type,
        hookd_core::model::TriggerType::Manual
    );
}

#[tokio::test]
async fn no_more_than_the_endpoint_cap_is_in_flight_at_once() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (now, max) = (in_flight.clone(), peak.clone());
    let receiver = Receiver::start(move |_| {
        let (now, max) = (now.clone(), max.clone());
        async move {
            let current = now.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(current, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            StatusCode::OK
        }
    })
    .await;
    let h = Harness::start(EngineConfig {
        endpoint_max_concurrency: 3,
        ..Harness::config()
    })
    .await;
    h.endpoint(&receiver.url).await;
    for _ in 0..30 {
        h.publish("{}").await;
    }
    receiver.wait_for(30).await;
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 3, "at most 3 in flight, saw {peak}");
}

#[tokio::test]
async fn a_new_message_goes_out_without_a_wake_up_or_a_poll() {
    let receiver = Receiver::start(|_| async { StatusCode::OK }).await;
    let h = Harness::start(EngineConfig {
        poll_interval: Duration::from_secs(3_600),
        ..Harness::config()
    })
    .await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.message("order.shipped", "{}");

    // Written as the outbox relay or another caller might, without waking the engine. Taken
    // as written, or (if the engine's first claim held every worker at that instant) claimed
    // right after that claim: either way with no wake-up from the caller and no poll.
    let created = h
        .store
        .publish(NewMessage::new(message.clone()))
        .await
        .unwrap();

    assert_eq!(created.deliveries, 1);
    receiver.wait_for(1).await;
    h.wait_for_status(&message, &endpoint, DeliveryStatus::Success)
        .await;
}

#[tokio::test]
async fn a_due_retry_goes_out_on_the_poll_while_other_deliveries_keep_succeeding() {
    let receiver = Receiver::failing_first(1, StatusCode::INTERNAL_SERVER_ERROR).await;
    let h = Harness::start(EngineConfig {
        poll_interval: Duration::from_millis(500),
        ..Harness::config()
    })
    .await;
    let endpoint = h.endpoint(&receiver.url).await;
    let failed = h.publish("{}").await;
    let status = h.wait_for_attempts(&failed, &endpoint, 1).await;
    assert_eq!(status, DeliveryStatus::Pending);

    // Messages written without a wake-up, as the API writes those the engine takes at once:
    // each succeeds, so finished attempts wake the engine every few milliseconds, longer than
    // the test waits for the retry below.
    let (store, clock, app) = (h.store.clone(), h.clock.clone(), h.app.id.clone());
    let traffic = tokio::spawn(async move {
        loop {
            let now = clock.now();
            let message = hookd_core::model::Message {
                id: hookd_core::MessageId::new(now),
                app_id: app.clone(),
                event_type: "order.shipped".into(),
                event_id: None,
                channels: None,
                ordering_key: None,
                tags: None,
                deliver_at: None,
                payload: Some(b"{}".to_vec()),
                created_at: now,
            };
            store
                .publish(NewMessage::new(message.clone()))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    receiver.wait_for(3).await;

    // The retry comes due with no wake-up: only the poll can find it.
    h.clock.advance(Duration::from_secs(3_600));
    let status = h.wait_for_attempts(&failed, &endpoint, 2).await;
    assert!(!traffic.is_finished(), "the traffic ran throughout");
    traffic.abort();
    assert_eq!(status, DeliveryStatus::Success);
}

#[tokio::test]
async fn a_delivery_taken_while_no_worker_is_free_goes_out_when_one_frees_without_a_wake_up() {
    // The first two requests wait until the test lets them answer.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let receiver = Receiver::start(move |n| {
        let held = held.clone();
        async move {
            if n < 2 {
                let _ = held.acquire().await;
            }
            StatusCode::OK
        }
    })
    .await;
    let h = Harness::start(EngineConfig {
        workers: 2,
        poll_interval: Duration::from_secs(3_600),
        ..Harness::config()
    })
    .await;
    let first_endpoint = h.endpoint(&receiver.url).await;
    for _ in 0..2 {
        let message = h.message("order.shipped", "{}");
        h.store
            .publish(NewMessage::new(message.clone()))
            .await
            .unwrap();
    }
    receiver.wait_for(2).await;

    // Their attempts hold both workers. The next message, to both endpoints, is still taken
    // as it is written: it waits in each endpoint's lane for a worker.
    let second_endpoint = h.endpoint(&receiver.url).await;
    let third = h.message("order.shipped", "{}");
    let created = h
        .store
        .publish(NewMessage::new(third.clone()))
        .await
        .unwrap();
    assert_eq!(created.queued, 0, "taken as written, with no worker free");
    gate.add_permits(2);

    receiver.wait_for(4).await;
    for endpoint in [&first_endpoint, &second_endpoint] {
        h.wait_for_status(&third, endpoint, DeliveryStatus::Success)
            .await;
    }
}

#[tokio::test]
async fn the_ssrf_guard_refuses_loopback_and_records_why() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let h = Harness::start_with_policy(Harness::config(), AddressPolicy::default()).await;
    let endpoint = h.endpoint(&receiver.url).await;
    let message = h.publish("{}").await;
    h.wait_for_attempts(&message, &endpoint, 1).await;
    let attempts = h
        .store
        .list_attempts_by_endpoint(&endpoint, &AttemptFilter::default(), &all())
        .await
        .unwrap();
    let attempt = &attempts.items[0];
    assert_eq!(attempt.response_status_code, 0);
    assert!(
        attempt.response.contains("127.0.0.1"),
        "the log names the refused address: {}",
        attempt.response
    );
    assert_eq!(receiver.count(), 0);
}
