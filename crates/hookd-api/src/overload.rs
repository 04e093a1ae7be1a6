//! Load shedding: the bound on the requests in progress (the bound on open connections is
//! [`crate::connections`]').
//!
//! Without it, a producer publishing faster than the database can commit makes requests wait
//! in memory without limit (and time out anyway). With it, memory stays bounded, requests
//! within the bound keep their latency, and the rest learn to retry: a request past it gets
//! 503 at once (the official SDKs retry 503 by themselves). Nothing is stored for a shed
//! request.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Semaphore;

use crate::ApiError;

/// The requests hookd works on at once.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(limit: usize) -> Self {
        Self(Arc::new(Semaphore::new(limit.max(1))))
    }
}

/// Middleware: runs the request if under the bound, else answers 503.
pub async fn shed(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let _permit = in_flight
        .0
        .try_acquire()
        .map_err(|_| ApiError::Overloaded)?;
    Ok(next.run(request).await)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::middleware::from_fn_with_state;
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
            .layer(from_fn_with_state(InFlight::new(1), shed));
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
