//! [`TaskRunner`]: runs background tasks (replays, expunging an application's contents) a
//! chunk at a time, each chunk one store transaction (see [`hookd_store::TaskStore`]), so a
//! task never holds the database for long and resumes after a restart where it stopped.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::Clock;
use hookd_store::Store;
use tokio::sync::Notify;

/// Messages one chunk looks at.
pub const CHUNK: usize = 1_000;
/// How often to look for tasks when nothing wakes the runner (another process's API may have
/// created one), and to wait after a failed chunk.
const POLL: Duration = Duration::from_secs(1);

/// Runs background tasks. Start it with [`TaskRunner::run`].
pub struct TaskRunner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    wake: Arc<Notify>,
    new_work: Arc<Notify>,
}

impl TaskRunner {
    /// A runner over `store`, woken through `wake` when the API creates a task; it notifies
    /// `new_work` when a chunk queued deliveries.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        wake: Arc<Notify>,
        new_work: Arc<Notify>,
    ) -> Self {
        Self {
            store,
            clock,
            wake,
            new_work,
        }
    }

    /// Runs chunks while tasks are running, until `shutdown` completes (between chunks: a
    /// chunk is one transaction, and a stop in the middle of one would only undo it).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let more = self.step().await;
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified(), if !more => {}
                () = tokio::time::sleep(POLL), if !more => {}
                () = std::future::ready(()), if more => {}
            }
        }
    }

    /// One chunk; whether there may be more to do at once.
    async fn step(&self) -> bool {
        match self.store.step_task(CHUNK, self.clock.now()).await {
            Ok(Some(step)) => {
                if step.queued > 0 {
                    self.new_work.notify_one();
                }
                true
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, "a background task's chunk failed; trying again");
                false
            }
        }
    }
}
