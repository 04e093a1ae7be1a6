//! Load shedding: the bound on the requests in progress (the bound on open connections is
//! [`crate::connections`]').
//!
//! Without it, a producer publishing faster than the database can commit makes requests wait
//! in memory without limit (and time out anyway). With it, memory stays bounded, requests
//! within the bound keep their latency, and the rest learn to retry: a request past it gets
//! 503 at once (the official SDKs retry 503 by themselves). Nothing is stored for a shed
//! request.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The requests hookd works on at once; [`crate::observe::Front`] asks it for every request,
/// and answers 503 past it.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(limit: usize) -> Self {
        Self(Arc::new(Semaphore::new(limit.max(1))))
    }

    /// Room for one more request, held until the permit is dropped; `None` past the bound.
    pub fn enter(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use tokio::sync::Notify;

    use super::*;

    #[tokio::test]
    async fn past_the_bound_requests_get_503_at_once() {
        let release = Arc::new(Notify::new());
        let held = release.clone();
        let app = Router::new()
            .route("/slow", get(move || async move { held.notified().await }))
            .route("/fast", get(|| async {}))
            .layer(crate::observe::Front::new(InFlight::new(1)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        let slow = tokio::spawn(reqwest::get(format!("{base}/slow")));
        let shed = loop {
            let answer = reqwest::get(format!("{base}/fast")).await.unwrap();
            if answer.status() == 503 {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(5)).await; // the slow one is not in yet
        };
        let body: serde_json::Value = shed.json().await.unwrap();
        assert_eq!(body["code"], "overloaded");
        release.notify_one();
        assert_eq!(slow.await.unwrap().unwrap().status(), 200);
        let after = reqwest::get(format!("{base}/fast")).await.unwrap();
        assert_eq!(
            after.status(),
            200,
            "capacity comes back when the request ends"
        );
    }
}
