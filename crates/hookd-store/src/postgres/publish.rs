//! Publishing on PostgreSQL with group commit: many callers' messages in one statement.
//!
//! Written alone, a message costs five round trips (begin, insert the message, read its
//! application's endpoints, insert its deliveries, commit) and a WAL flush, and between the
//! statements its backend sits idle in its transaction. Under concurrent publishes the round
//! trips, not the database, then cap messages per second while its CPU idles. So, as SQLite's
//! writer does (`crate::sqlite::db`), every publish of a store goes to one task, which takes the
//! publishes already waiting (at most [`MAX_BATCH`], and never waits for more: a lone publish is
//! written at once) and writes them in two round trips whatever the batch's size: one read of
//! the enabled endpoints of all their applications, each message then routed in Rust by its
//! own filters, and one statement, its own transaction, that inserts the messages and their
//! deliveries from arrays (`unnest`). A caller still hears `Ok` only once its message and
//! deliveries are committed. No `BEGIN` and `COMMIT` round trips: they are a fixed cost per
//! batch, in hookd and in PostgreSQL, and with several processes on one database each
//! process's batches are smaller. Reading the endpoints before the insert rather than inside
//! its transaction changes nothing: each statement of a `READ COMMITTED` transaction reads its
//! own snapshot anyway, and an endpoint deleted meanwhile fails the insert (its foreign key)
//! as it did inside the transaction.
//!
//! Every caller gets the answer it would get publishing alone:
//! - A taken `eventId`, in the database or by an earlier publish of the same batch, is that
//!   message's conflict; the message insert skips it (`ON CONFLICT … DO NOTHING`) and the rest
//!   of the batch is written. Clients resending an event are common enough that they must not
//!   cost the batch its group commit.
//! - Anything else the database refuses (an application, or a test send's endpoint, deleted
//!   meanwhile; a value it rejects) or that does not decode (an endpoint's stored filters) writes
//!   nothing of the batch. Its messages are then written one at a time in their order, each in its
//!   own transaction exactly as a lone publish was before batching, so each caller gets its own
//!   answer (and of two publishes with one `eventId`, the first wins).
//! - A database that cannot be reached fails every caller of the batch with its error at once,
//!   rather than one after another, each after its own wait for a connection. A batch whose
//!   connection failed during its insert is not retried: it may have been committed, so its
//!   callers hear the failure, as a lone publish would.
//!
//! Both statements are kept prepared. The endpoint read looks each application up through a
//! `LATERAL` subquery that `OFFSET 0` keeps from being merged into a join, so even the
//! generic plan of a statement first planned on an empty table reads the applications'
//! endpoints by index (see `record` and `plans`). Messages are inserted in (application,
//! `eventId`) order, so two processes' batches holding the same event ids take their keys in
//! the same order and cannot deadlock waiting for each other's.
//!
//! The task holds the pool and the receiving end of the queue; every clone of the store holds
//! a [`Publisher`], the sending end. When the last clone is dropped the queue closes, and the
//! task finishes the batch in hand and ends.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use hookd_core::model::Message;
use sqlx::postgres::PgPool;
use sqlx::{AssertSqlSafe, Postgres, Row as _, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::messages::{Deliveries, INSERT_DELIVERIES, Subscriber, insert_message, routed};
use crate::error::taken;
use crate::json::encode_opt;
use crate::{CreatedMessage, Route, StoreError};

/// The enabled endpoints of the applications in `$1`, each application looked up by index.
pub(super) const SUBSCRIBERS: &str = "SELECT e.app_id, e.id, e.event_types, e.channels
     FROM unnest($1::text[]) a(app_id)
     CROSS JOIN LATERAL (SELECT app_id, id, event_types, channels FROM endpoints
         WHERE app_id = a.app_id AND NOT disabled OFFSET 0) e";

/// Most publishes one transaction takes; bounds the wait a batch adds for its last caller.
const MAX_BATCH: usize = 256;

/// The publish task's queue; see the module doc.
#[derive(Clone, Debug)]
pub(super) struct Publisher {
    queue: mpsc::UnboundedSender<Publish>,
}

impl Publisher {
    /// Starts the publish task of `pool` on the current runtime.
    pub(super) fn start(pool: PgPool) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        tokio::spawn(publish_loop(pool, waiting));
        Self { queue }
    }

    /// Writes `message` routed by `route` in the next batch; see
    /// [`crate::MessageStore::create_routed_message`].
    pub(super) async fn publish(
        &self,
        message: &Message,
        route: &Route,
    ) -> Result<CreatedMessage, StoreError> {
        let (reply, answer) = oneshot::channel();
        let publish = Publish {
            message: message.clone(),
            route: route.clone(),
            reply,
        };
        self.queue.send(publish).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the PostgreSQL publish task has stopped".into())
}

/// One caller's publish, waiting for its batch.
struct Publish {
    message: Message,
    route: Route,
    reply: oneshot::Sender<Result<CreatedMessage, StoreError>>,
}

impl Publish {
    fn answer(self, outcome: Result<CreatedMessage, StoreError>) {
        // A caller that stopped waiting (its request was cancelled) needs no answer.
        let _ = self.reply.send(outcome);
    }

    /// Answers from the batch's outcome: written with this many deliveries, or `None` when
    /// its `eventId` was taken.
    fn answer_written(self, deliveries: Option<usize>) {
        let Publish { message, reply, .. } = self;
        let outcome = match deliveries {
            Some(deliveries) => Ok(CreatedMessage {
                message,
                deliveries,
                queued: deliveries,
            }),
            None => Err(StoreError::Conflict(taken::event_id(
                message.event_id.as_deref(),
            ))),
        };
        let _ = reply.send(outcome);
    }
}

/// Takes the publishes waiting, a batch at a time, until every [`Publisher`] is dropped.
async fn publish_loop(pool: PgPool, mut waiting: mpsc::UnboundedReceiver<Publish>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // Waits for one publish, then takes those already waiting with it; 0 once closed.
    while waiting.recv_many(&mut batch, MAX_BATCH).await > 0 {
        write(&pool, std::mem::take(&mut batch)).await;
    }
}

/// Writes one batch and answers each of its callers.
async fn write(pool: &PgPool, batch: Vec<Publish>) {
    let candidates = candidates(&batch);
    let subscribers = match subscribers_of(pool, candidates.iter().map(|&i| &batch[i])).await {
        Ok(subscribers) => subscribers,
        // Each message written alone reads its own (and fails at once if the database is
        // gone).
        Err(error) => {
            log_refused(&error, batch.len());
            return write_each(pool, batch).await;
        }
    };
    let mut counts = vec![None; batch.len()];
    let mut deliveries = Deliveries::default();
    for &i in &candidates {
        let Publish { message, route, .. } = &batch[i];
        let of_app = subscribers
            .get(message.app_id.as_str())
            .map_or(&[][..], Vec::as_slice);
        let routed = routed(message, route, of_app);
        counts[i] = Some(routed.len());
        deliveries.add(message, routed);
    }
    match insert_batch(pool, &batch, &candidates, &deliveries).await {
        Ok(inserted) => {
            for (publish, count) in batch.into_iter().zip(counts) {
                // Candidates have distinct ids once their insert succeeded (the primary key),
                // so an id inserted names one position; a candidate not inserted lost its
                // `eventId` to a stored message.
                let written = count.filter(|_| inserted.contains(publish.message.id.as_str()));
                publish.answer_written(written);
            }
        }
        // The server refused the statement: nothing of it was written.
        Err(error) if error.as_database_error().is_some() => {
            log_refused(&error, batch.len());
            write_each(pool, batch).await
        }
        // The connection failed: the statement may have been committed, so writing the
        // messages again could answer a written one with a conflict.
        Err(error) => fail(batch, &error),
    }
}

/// Inserts the messages of the publishes at `positions` (skipping those whose `eventId` is
/// taken) and the deliveries of those inserted, in one statement and so one transaction of
/// its own, and answers the ids inserted.
async fn insert_batch(
    pool: &PgPool,
    batch: &[Publish],
    positions: &[usize],
    deliveries: &Deliveries<'_>,
) -> Result<HashSet<String>, sqlx::Error> {
    let messages: Vec<&Message> = positions.iter().map(|&i| &batch[i].message).collect();
    let rows = deliveries
        .bind(sqlx::query(AssertSqlSafe(PUBLISH.as_str())))
        .bind(column(&messages, |m| m.id.as_str()))
        .bind(column(&messages, |m| m.app_id.as_str()))
        .bind(column(&messages, |m| m.event_type.as_str()))
        .bind(column(&messages, |m| m.event_id.as_deref()))
        .bind(column(&messages, |m| encode_opt(m.channels.as_ref())))
        .bind(column(&messages, |m| m.payload.as_deref()))
        .bind(column(&messages, |m| m.created_at.as_millis()))
        .fetch_all(pool)
        .await?;
    rows.iter().map(|row| row.try_get(0)).collect()
}

/// A batch in one statement: the messages from arrays (`$5` to `$11`), skipping any whose
/// `eventId` is taken, then the deliveries routed to them ([`INSERT_DELIVERIES`], `$1` to `$4`)
/// of the messages written; answers the ids written. The foreign keys of the deliveries are
/// checked at the end of the statement, when their messages are in place.
static PUBLISH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH written AS (
             INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at)
             SELECT * FROM UNNEST($5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                                  $10::bytea[], $11::bigint[])
             ON CONFLICT (app_id, event_id) DO NOTHING
             RETURNING id
         ), deliveries AS (
             {INSERT_DELIVERIES} WHERE routed.message_id IN (SELECT id FROM written)
         )
         SELECT id FROM written"
    )
});

/// The positions of the publishes whose message the batch tries to insert: all but those
/// repeating the (application, `eventId`) of an earlier one, which lose to it. In (application,
/// `eventId`) order, the order every batch takes these keys in.
fn candidates(batch: &[Publish]) -> Vec<usize> {
    let mut keys = HashSet::new();
    let mut candidates: Vec<usize> = (0..batch.len())
        .filter(|&i| {
            let message = &batch[i].message;
            message
                .event_id
                .as_deref()
                .is_none_or(|event_id| keys.insert((message.app_id.as_str(), event_id)))
        })
        .collect();
    candidates.sort_by_key(|&i| {
        let message = &batch[i].message;
        (message.app_id.as_str(), message.event_id.as_deref())
    });
    candidates
}

/// One field of every message, to bind as an array.
fn column<'a, T>(messages: &[&'a Message], field: impl Fn(&'a Message) -> T) -> Vec<T> {
    messages.iter().map(|&m| field(m)).collect()
}

/// The enabled endpoints of every application the `written` publishes route to subscribers,
/// by application, in one read.
async fn subscribers_of(
    pool: &PgPool,
    written: impl Iterator<Item = &Publish>,
) -> Result<HashMap<String, Vec<Subscriber>>, StoreError> {
    let mut apps: Vec<&str> = written
        .filter(|p| p.route == Route::Subscribers)
        .map(|p| p.message.app_id.as_str())
        .collect();
    apps.sort_unstable();
    apps.dedup();
    let mut by_app: HashMap<String, Vec<Subscriber>> = HashMap::new();
    if apps.is_empty() {
        return Ok(by_app);
    }
    let rows: Vec<(String, String, Option<String>, Option<String>)> = sqlx::query_as(SUBSCRIBERS)
        .bind(&apps)
        .fetch_all(pool)
        .await?;
    for (app, id, event_types, channels) in rows {
        let subscriber = Subscriber::decode(id, event_types, channels)?;
        by_app.entry(app).or_default().push(subscriber);
    }
    Ok(by_app)
}

/// Writes each message of a batch that could not be written whole alone, in the batch's
/// order, each in its own transaction as a lone publish is written: each caller gets the
/// answer it would have had alone. If the database cannot be reached, the rest fail at once.
async fn write_each(pool: &PgPool, batch: Vec<Publish>) {
    let mut batch = batch.into_iter();
    while let Some(publish) = batch.next() {
        match pool.begin().await {
            Ok(tx) => {
                let outcome = write_alone(tx, &publish.message, &publish.route).await;
                publish.answer(outcome);
            }
            Err(error) => return fail(std::iter::once(publish).chain(batch), &error),
        }
    }
}

/// Notes a batch the database refused (expected now and then: an application deleted while
/// its messages were being published), before its messages are written one at a time.
fn log_refused(error: &dyn std::fmt::Display, messages: usize) {
    tracing::debug!(
        %error,
        messages,
        "the publish batch was refused; writing its messages one at a time"
    );
}

/// Writes one message and its deliveries in `tx`, its own transaction, and commits.
async fn write_alone(
    mut tx: Transaction<'static, Postgres>,
    message: &Message,
    route: &Route,
) -> Result<CreatedMessage, StoreError> {
    // Any early return drops `tx` uncommitted: nothing is written.
    let created = insert_message(&mut tx, message, route).await?;
    tx.commit().await?;
    Ok(created)
}

/// Fails every publish with `error`, the database's, as a lone publish would have failed.
fn fail(publishes: impl IntoIterator<Item = Publish>, error: &sqlx::Error) {
    tracing::debug!(%error, "the database cannot take the publish batch");
    for publish in publishes {
        // As `From<sqlx::Error>` maps it for a lone publish.
        publish.answer(Err(StoreError::Unavailable(error.to_string())));
    }
}
