//! A connection kept for a writer that writes one batch after another.
//!
//! The publish task and the recorder each write their batches one at a time. Taking a pooled
//! connection for every batch costs twice: the pool checks an idle connection with a round
//! trip before handing it out, and its idle queue is first in, first out, so batch after
//! batch runs in each of the pool's backends in turn, each one's caches gone cold meanwhile.
//! So each of these writers keeps one connection while its batches follow one another. A
//! connection unused for [`KEEP_FOR`], or whose batch failed, goes back to the pool, which
//! checks it before anyone uses it again: a connection the server dropped meanwhile costs at
//! most the one batch that found it dropped.

use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool};
use tokio::sync::{Mutex, MutexGuard};

/// How long a kept connection may sit unused and still be used without the pool's check.
const KEEP_FOR: Duration = Duration::from_secs(1);

/// A connection kept since it was last used, if any.
type Slot = Option<(PoolConnection<Postgres>, Instant)>;

/// One writer's kept connection.
#[derive(Debug)]
pub(super) struct Held {
    pool: PgPool,
    slot: Mutex<Slot>,
}

impl Held {
    pub(super) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            slot: Mutex::new(None),
        }
    }

    /// The kept connection if it was used within [`KEEP_FOR`], else one from the pool. A
    /// caller that finds the kept one in use (a second writer at once) gets one from the pool,
    /// which it does not keep.
    pub(super) async fn take(&self) -> Result<HeldConnection<'_>, sqlx::Error> {
        let mut slot = self.slot.try_lock().ok();
        // A stale one is dropped here, back to the pool, which checks it before reuse.
        let kept = slot
            .as_mut()
            .and_then(|slot| slot.take())
            .filter(|(_, used)| used.elapsed() < KEEP_FOR);
        let conn = match kept {
            Some((conn, _)) => conn,
            None => self.pool.acquire().await?,
        };
        Ok(HeldConnection { slot, conn })
    }
}

/// A connection out of [`Held`] for one batch. Dropped, it goes back to the pool; kept (after
/// its batch succeeded), it waits for the writer's next batch.
pub(super) struct HeldConnection<'a> {
    slot: Option<MutexGuard<'a, Slot>>,
    conn: PoolConnection<Postgres>,
}

impl HeldConnection<'_> {
    /// Keeps the connection for the writer's next batch, if it is the writer's own.
    pub(super) fn keep(self) {
        if let Some(mut slot) = self.slot {
            *slot = Some((self.conn, Instant::now()));
        }
    }
}

impl Deref for HeldConnection<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl DerefMut for HeldConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::*;
    use crate::testing::fresh_postgres;

    async fn backend(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(conn)
            .await
    }

    #[tokio::test]
    async fn batches_that_follow_one_another_run_in_one_backend() {
        let Some((url, _db)) = fresh_postgres("postgres::held_kept").await else {
            return;
        };
        let pool = PgPool::connect(&url).await.unwrap();
        // Two idle connections, which the pool would hand out in turn.
        let (first, second) = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
        drop((first, second));
        let held = Held::new(pool);
        let mut backends = Vec::new();
        for _ in 0..5 {
            let mut conn = held.take().await.unwrap();
            backends.push(backend(&mut conn).await.unwrap());
            conn.keep();
        }
        assert!(
            backends.windows(2).all(|pair| pair[0] == pair[1]),
            "{backends:?}"
        );

        // Not kept (its batch failed), it is no longer the writer's.
        let conn = held.take().await.unwrap();
        drop(conn);
        assert!(held.slot.try_lock().unwrap().is_none());
    }

    #[tokio::test]
    async fn a_kept_connection_the_server_dropped_fails_one_batch_only() {
        let Some((url, _db)) = fresh_postgres("postgres::held_dropped").await else {
            return;
        };
        let held = Held::new(PgPool::connect(&url).await.unwrap());
        let mut conn = held.take().await.unwrap();
        let pid = backend(&mut conn).await.unwrap();
        conn.keep();
        let mut admin = PgConnection::connect(&url).await.unwrap();
        sqlx::query("SELECT pg_terminate_backend($1, 10000)")
            .bind(pid)
            .execute(&mut admin)
            .await
            .unwrap();

        let mut conn = held.take().await.unwrap();
        assert!(
            backend(&mut conn).await.is_err(),
            "the dropped connection was used"
        );
        drop(conn);
        let mut conn = held.take().await.unwrap();
        let replaced = backend(&mut conn).await.unwrap();
        assert_ne!(replaced, pid);
    }

    #[tokio::test]
    async fn a_second_writer_at_once_gets_a_connection_of_its_own() {
        let Some((url, _db)) = fresh_postgres("postgres::held_second").await else {
            return;
        };
        let held = Held::new(PgPool::connect(&url).await.unwrap());
        let mut first = held.take().await.unwrap();
        let mut second = held.take().await.unwrap();
        assert_ne!(
            backend(&mut first).await.unwrap(),
            backend(&mut second).await.unwrap()
        );
        let kept = backend(&mut first).await.unwrap();
        first.keep();
        second.keep();
        let mut next = held.take().await.unwrap();
        assert_eq!(backend(&mut next).await.unwrap(), kept);
    }
}
