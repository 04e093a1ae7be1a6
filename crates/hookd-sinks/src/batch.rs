//! Batching for destinations that take many messages at once (`batchSize`, `maxWaitSecs`):
//! an S3 object per batch rather than per message. Each attempt still publishes its own
//! message and waits for its own answer, so the delivery log stays one attempt per message;
//! [`Batched`] gathers the attempts in flight to one destination, as a group commit does, and
//! publishes them together once `size` have gathered or the first has waited `wait`. A batch
//! holds at most as many messages as the destination has attempts in flight.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::{Publication, Published, Sink, SinkError};

/// A sink whose publications are gathered into batches for `inner`.
pub struct Batched {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Arc<dyn Sink>,
    size: usize,
    wait: Duration,
    gathering: Mutex<Gathering>,
}

/// The publications waiting for their batch, each with its caller's answer.
#[derive(Default)]
struct Gathering {
    waiting: Vec<(Publication, Answer)>,
    /// Whether a timer will publish the waiting ones once the first has waited long enough.
    timed: bool,
}

type Answer = oneshot::Sender<Result<Published, SinkError>>;

impl Batched {
    /// Batches of at most `size` publications for `inner`, none waiting longer than `wait`.
    pub fn new(inner: Arc<dyn Sink>, size: usize, wait: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                inner,
                size: size.max(1),
                wait,
                gathering: Mutex::default(),
            }),
        }
    }
}

#[async_trait]
impl Sink for Batched {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        let mut answers = Vec::with_capacity(batch.len());
        let full = {
            let mut gathering = self.shared.gathering.lock().expect("batch poisoned");
            for publication in batch {
                let (answer, answered) = oneshot::channel();
                gathering.waiting.push((publication.clone(), answer));
                answers.push(answered);
            }
            if gathering.waiting.len() >= self.shared.size {
                Some(std::mem::take(&mut gathering.waiting))
            } else {
                if !gathering.timed {
                    gathering.timed = true;
                    tokio::spawn(self.shared.clone().publish_after_wait());
                }
                None
            }
        };
        if let Some(full) = full {
            self.shared.publish(full).await;
        }
        let mut last = None;
        for answered in answers {
            let answer = answered.await.map_err(|_| {
                SinkError::Connect("the batch was dropped before it was published".into())
            })?;
            last = Some(answer?);
        }
        last.ok_or_else(|| SinkError::Config("nothing to publish".into()))
    }
}

impl Shared {
    /// Publishes what is waiting once the wait is over (what a full batch left behind it, or
    /// the first publications of the next batch).
    async fn publish_after_wait(self: Arc<Self>) {
        tokio::time::sleep(self.wait).await;
        let waiting = {
            let mut gathering = self.gathering.lock().expect("batch poisoned");
            gathering.timed = false;
            std::mem::take(&mut gathering.waiting)
        };
        if !waiting.is_empty() {
            self.publish(waiting).await;
        }
    }

    /// Publishes `waiting` as one batch and answers every caller with its outcome.
    async fn publish(&self, waiting: Vec<(Publication, Answer)>) {
        let (publications, answers): (Vec<_>, Vec<_>) = waiting.into_iter().unzip();
        let outcome = self.inner.publish(&publications).await;
        for answer in answers {
            // A caller that stopped waiting needs no answer.
            let _ = answer.send(outcome.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;

    use super::*;

    /// Counts the batches it is given and their sizes.
    #[derive(Default)]
    struct Counting {
        sizes: Mutex<Vec<usize>>,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Sink for Counting {
        async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.sizes.lock().unwrap().push(batch.len());
            Ok(Published {
                summary: format!("{} messages", batch.len()),
            })
        }
    }

    fn publication(n: usize) -> Publication {
        Publication {
            message_id: format!("msg_{n}"),
            event_type: "order.shipped".into(),
            ordering_key: None,
            body: Bytes::from_static(b"{}"),
            headers: Vec::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_goes_at_once_and_the_rest_after_the_wait() {
        let inner = Arc::new(Counting::default());
        let batched = Arc::new(Batched::new(inner.clone(), 3, Duration::from_secs(10)));
        let publishes = (0..4).map(|n| {
            let batched = batched.clone();
            tokio::spawn(async move { batched.publish(&[publication(n)]).await })
        });
        let answers = futures_join(publishes.collect()).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        assert_eq!(*inner.sizes.lock().unwrap(), [3, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_publication_waits_at_most_the_wait() {
        let inner = Arc::new(Counting::default());
        let batched = Batched::new(inner.clone(), 100, Duration::from_secs(5));
        let started = tokio::time::Instant::now();
        let answer = batched.publish(&[publication(1)]).await.unwrap();
        assert_eq!(answer.summary, "1 messages");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
    }

    async fn futures_join<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.unwrap());
        }
        out
    }
}
