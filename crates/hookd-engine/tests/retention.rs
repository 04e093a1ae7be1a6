//! The purger in the background beside a real engine, over a real SQLite file, on the
//! engine's manual clock: delivered content goes once the clock passes the window; a message
//! with a delivery still to do keeps everything.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{Harness, Receiver};
use hookd_core::Clock;
use hookd_core::model::{DeliveryStatus, Message};
use hookd_engine::{Purger, RetentionConfig};
use hookd_store::{AttemptFilter, PageRequest};

const DAY: Duration = Duration::from_secs(86_400);

async fn payload(h: &Harness, message: &Message) -> Option<Vec<u8>> {
    h.store
        .get_message(&h.app.id, message.id.as_str())
        .await
        .unwrap()
        .unwrap()
        .payload
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
async fn delivered_content_is_purged_past_the_window_and_pending_content_never() {
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
            // One message per batch: the pass meets the waiting message first, then moves on.
            batch: 1,
            pause: Duration::from_millis(1),
            interval: Duration::from_millis(10),
        },
    );
    tokio::spawn(purger.run(std::future::pending()));
    h.advance(31 * DAY);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while payload(&h, &delivered).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the delivered message was never purged"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(attempts(&h, &delivered).await, 0);
    assert_eq!(
        payload(&h, &waiting).await.as_deref(),
        Some(&br#"{"n": 1}"#[..]),
        "the pending delivery keeps its payload"
    );
    assert_eq!(attempts(&h, &waiting).await, 1, "and its attempt");
    assert_eq!(h.status(&waiting, &down).await, DeliveryStatus::Pending);
}
