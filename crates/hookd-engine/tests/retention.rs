//! The purger in the background beside a real engine, over a real SQLite file, on the
//! engine's manual clock: delivered content goes once the clock passes the window, and its
//! record once the clock passes the records' time; a message with a delivery still to do keeps
//! everything.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{Harness, Receiver};
use hookd_core::Clock;
use hookd_core::model::{DeliveryStatus, Message};
use hookd_engine::{Purger, RetentionConfig};
use hookd_store::{AttemptFilter, PageRequest};

const DAY: Duration = Duration::from_secs(86_400);

async fn stored(h: &Harness, message: &Message) -> Option<Message> {
    h.store
        .get_message(&h.app.id, message.id.as_str())
        .await
        .unwrap()
}

async fn payload(h: &Harness, message: &Message) -> Option<Vec<u8>> {
    stored(h, message).await.unwrap().payload
}

async fn deliveries(h: &Harness, message: &Message) -> usize {
    h.store
        .list_message_deliveries(&h.app.id, message)
        .await
        .unwrap()
        .len()
}

/// Waits (real time, the purger running beside) until `done` holds.
async fn eventually<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn attempts(h: &Harness, message: &Message) -> usize {
    let page = PageRequest {
        limit: 10,
        cursor: None,
    };
    h.store
        .list_attempts_by_message(&h.app.id, message, &AttemptFilter::default(), &page)
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn delivered_content_then_its_record_go_and_pending_content_never() {
    let h = Harness::start(Harness::config()).await;
    // The older message waits for a disabled endpoint: pending, whatever the time.
    let failing = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let down = h.endpoint(&failing.url).await;
    let waiting = h.publish(r#"{"n": 1}"#).await;
    h.wait_for_attempts(&waiting, &down, 1).await;
    h.store
        .disable_endpoint(&down.id, "test", h.clock.now(), &[])
        .await
        .unwrap();
    let ok = Receiver::always(StatusCode::OK).await;
    let up = h.endpoint(&ok.url).await;
    let delivered = h.publish(r#"{"n": 2}"#).await;
    h.wait_for_status(&delivered, &up, DeliveryStatus::Success)
        .await;

    let purger = Purger::new(
        h.store.clone(),
        h.clock.clone(),
        RetentionConfig {
            window: 30 * DAY,
            records: Some(90 * DAY),
            event_ids: 365 * DAY,
            // One message per batch: the pass meets the waiting message first, then moves on.
            batch: 1,
            pause: Duration::from_millis(1),
            interval: Duration::from_millis(10),
        },
    );
    tokio::spawn(purger.run(std::future::pending()));
    h.advance(31 * DAY);

    eventually("the delivered message was never purged", || async {
        payload(&h, &delivered).await.is_none()
    })
    .await;
    assert_eq!(attempts(&h, &delivered).await, 0);
    assert_eq!(
        deliveries(&h, &delivered).await,
        1,
        "inside its time the record stays"
    );

    h.advance(60 * DAY);
    eventually(
        "the delivered message's record was never deleted",
        || async { stored(&h, &delivered).await.is_none() },
    )
    .await;
    assert_eq!(
        deliveries(&h, &delivered).await,
        0,
        "its deliveries go with it"
    );
    assert!(
        stored(&h, &waiting).await.is_some(),
        "the pending one stays"
    );
    assert_eq!(
        payload(&h, &waiting).await.as_deref(),
        Some(&br#"{"n": 1}"#[..]),
        "the pending delivery keeps its payload"
    );
    assert_eq!(attempts(&h, &waiting).await, 1, "and its attempt");
    assert_eq!(h.status(&waiting, &down).await, DeliveryStatus::Pending);
}
