//! How `hookd serve` stops, in one place (modelled on mini-redis's `Shutdown`): who is told to
//! stop, in what order they are waited for, and how long the API may take.
//!
//! Each part of the server is started through [`Shutdown`] and handed a [`Shutdown::notice`],
//! a future that completes when the parts are told to stop. On SIGINT or SIGTERM:
//! 1. every part is told at once: the API stops accepting connections, the engine and the
//!    relay stop claiming, the purger and the metrics listener stop;
//! 2. the API's open requests get the shutdown grace to finish; those still open then are cut
//!    off;
//! 3. the other parts are waited for in the order they started. The engine bounds its own
//!    drain by the same grace: attempts in flight finish and are recorded, or are stopped at the
//!    deadline with their claims given back (see [`hookd_engine::Engine`]).

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The parts of a running server and what stops them.
pub struct Shutdown {
    /// Turns true when the parts are told to stop.
    told: watch::Sender<bool>,
    /// How long the API's open requests may go on once told.
    grace: Duration,
    /// The API server, if this process serves the API: waited for first, at most `grace`.
    api: Option<JoinHandle<()>>,
    /// The other parts by name, waited for in the order they started.
    parts: Vec<(&'static str, JoinHandle<()>)>,
}

impl Shutdown {
    pub fn new(grace: Duration) -> Self {
        Self {
            told: watch::channel(false).0,
            grace,
            api: None,
            parts: Vec::new(),
        }
    }

    /// Completes once the parts are told to stop: what each part is handed to know when.
    pub fn notice(&self) -> impl Future<Output = ()> + Send + use<> {
        let mut told = self.told.subscribe();
        async move {
            // An error means the sender is gone, which also means stop.
            let _ = told.wait_for(|stop| *stop).await;
        }
    }

    /// Runs `part` (which stops on its [`notice`](Self::notice)) until it ends; the shutdown
    /// waits for it after the API.
    pub fn start(&mut self, name: &'static str, part: impl Future<Output = ()> + Send + 'static) {
        self.parts.push((name, tokio::spawn(part)));
    }

    /// Runs the API server (which stops accepting on its notice and then drains its open
    /// requests); the shutdown waits for it first, at most the grace.
    pub fn start_api(&mut self, server: impl Future<Output = ()> + Send + 'static) {
        self.api = Some(tokio::spawn(server));
    }

    /// Waits for SIGINT or SIGTERM, then stops every part (see [`stop`](Self::stop)).
    pub async fn on_signal(self) -> anyhow::Result<()> {
        signal().await;
        self.stop().await
    }

    /// Tells every part to stop at once, gives the API's open requests the grace, then waits
    /// for the other parts in the order they started.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.told.send(true);
        if let Some(api) = self.api {
            let cut_off = api.abort_handle();
            match tokio::time::timeout(self.grace, api).await {
                Ok(ended) => ended.map_err(|e| anyhow::anyhow!("the API server: {e}"))?,
                Err(_) => {
                    cut_off.abort();
                    tracing::warn!("API requests still open after the shutdown grace are cut off");
                }
            }
        }
        for (name, part) in self.parts {
            part.await.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        Ok(())
    }
}

/// Completes on SIGINT or (on Unix) SIGTERM.
async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use super::*;

    /// A part that, once told, takes `drain` to finish and then notes that it did.
    fn draining(
        shutdown: &Shutdown,
        drain: Duration,
    ) -> (impl Future<Output = ()> + Send + use<>, Arc<AtomicBool>) {
        let (notice, done) = (shutdown.notice(), Arc::new(AtomicBool::new(false)));
        let noted = done.clone();
        let part = async move {
            notice.await;
            tokio::time::sleep(drain).await;
            noted.store(true, Ordering::SeqCst);
        };
        (part, done)
    }

    #[tokio::test]
    async fn every_part_is_told_and_waited_for_and_the_api_is_cut_off_at_the_grace() {
        let grace = Duration::from_millis(200);
        let mut shutdown = Shutdown::new(grace);
        let (engine, engine_done) = draining(&shutdown, Duration::from_millis(100));
        let (relay, relay_done) = draining(&shutdown, Duration::ZERO);
        let (api, api_done) = draining(&shutdown, Duration::from_secs(3600));
        shutdown.start("engine", engine);
        shutdown.start("relay", relay);
        shutdown.start_api(api);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !engine_done.load(Ordering::SeqCst),
            "nothing stops before it is told"
        );

        let started = Instant::now();
        shutdown.stop().await.unwrap();
        let took = started.elapsed();
        assert!(engine_done.load(Ordering::SeqCst) && relay_done.load(Ordering::SeqCst));
        assert!(!api_done.load(Ordering::SeqCst), "the API was cut off");
        let far_short_of_the_api_drain = Duration::from_secs(60);
        assert!(
            took >= grace && took < far_short_of_the_api_drain,
            "stopped after {took:?}"
        );
    }

    #[tokio::test]
    async fn an_api_that_drains_within_the_grace_is_waited_for_not_the_whole_grace() {
        let mut shutdown = Shutdown::new(Duration::from_secs(3600));
        let (api, api_done) = draining(&shutdown, Duration::from_millis(20));
        shutdown.start_api(api);
        tokio::time::timeout(Duration::from_secs(10), shutdown.stop())
            .await
            .expect("stops once the API has drained")
            .unwrap();
        assert!(api_done.load(Ordering::SeqCst));
    }
}
