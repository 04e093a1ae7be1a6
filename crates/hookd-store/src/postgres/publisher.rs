//! Publishing on PostgreSQL with group commit: many callers' messages in one statement.
//!
//! Written alone, a message costs five round trips (begin, insert the message, read its
//! application's endpoints, insert its deliveries, commit) and a WAL flush, and between the
//! statements its backend sits idle in its transaction. Under concurrent publishes the round
//! trips, not the database, then cap messages per second while its CPU idles. So, as SQLite's
//! writer does (`crate::sqlite::writer`), every publish of a store goes to one task, which takes the
//! publishes already waiting (at most [`MAX_BATCH`], and never waits for more: a lone publish is
//! written at once) and writes them in two round trips whatever the batch's size: one read of
//! the enabled endpoints of all their applications, each message then routed in Rust by its
//! own filters, and one statement, its own transaction, that inserts the messages and their
//! deliveries from arrays (`unnest`, inside `publish_batch`). A caller still hears `Ok` only
//! once its message and deliveries are committed. No `BEGIN` and `COMMIT` round trips: they
//! are a fixed cost per batch, in hookd and in PostgreSQL, and with several processes on one
//! database each process's batches are smaller. Reading the endpoints before the insert
//! rather than inside its transaction changes nothing: each statement of a `READ COMMITTED`
//! transaction reads its own snapshot anyway, and an endpoint deleted meanwhile fails the
//! insert (`lock_parents` finds it gone) as it did inside the transaction.
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
//! New deliveries are offered to this process's engine, as SQLite's writer offers them (see
//! [`crate::Handoff`]): those it has a worker and endpoint room for are written `sending` under
//! its lease by the same statement and started once committed, so a fresh message costs no
//! claim. The statement is a call of `publish_batch` (migration 0010), which, when it hands
//! anything over, takes the claims' advisory lock first and gives each endpoint no more than
//! the room its cap leaves after every process's attempts in flight; rate-limited and paused
//! endpoints are left to claims. A delivery it cannot hand off is written pending, due at
//! once, and its room is freed.
//!
//! Both statements run on the connection the task keeps while batches follow one another (see
//! `super::held`), and are kept prepared. The endpoint read looks each application up through a
//! `LATERAL` subquery that `OFFSET 0` keeps from being merged into a join, so even the
//! generic plan of a statement first planned on an empty table reads the applications'
//! endpoints by index (see `record` and `functions::plans`). Messages are inserted in (application,
//! `eventId`) order, so two processes' batches holding the same event ids take their keys in
//! the same order and cannot deadlock waiting for each other's.
//!
//! The task holds the pool and the receiving end of the queue; every clone of the store holds
//! a [`Publisher`], the sending end. When the last clone is dropped the queue closes, and the
//! task finishes the batch in hand and ends.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, RwLock, Weak};

use hookd_core::Timestamp;
use hookd_core::model::{Delivery, DeliveryStatus, Endpoint, Message};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Postgres, Row as _, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::held::Held;
use super::publish::{Routed, Subscriber, insert_message, routed};
use super::rows;
use crate::columns::{DELIVERED, ENDPOINT_COLUMNS};
use crate::error::taken;
use crate::json::encode_opt;
use crate::{ClaimedDelivery, CreatedMessage, Handoff, Reserved, Route, StoreError};

/// The enabled endpoints that get deliveries ([`DELIVERED`]) of the applications in `$1`, each
/// application looked up by index; whole rows, since the deliveries handed off start with
/// their endpoint.
pub(super) static SUBSCRIBERS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {ENDPOINT_COLUMNS} FROM unnest($1::text[]) a(app_id)
         CROSS JOIN LATERAL (SELECT * FROM endpoints
             WHERE app_id = a.app_id AND NOT disabled AND {DELIVERED} OFFSET 0) e"
    )
});

/// The same endpoints' routing columns only, for a process whose engine takes no new
/// deliveries (an API-only process): it never needs their keys, headers or metadata.
pub(super) static SUBSCRIBER_FILTERS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT e.app_id, e.id, e.event_types, e.channels, e.strict_order
         FROM unnest($1::text[]) a(app_id)
         CROSS JOIN LATERAL (SELECT id, app_id, event_types, channels, strict_order FROM endpoints
             WHERE app_id = a.app_id AND NOT disabled AND {DELIVERED} OFFSET 0) e"
    )
});

/// A row of [`SUBSCRIBER_FILTERS`]: application, then the subscriber's columns.
type FilterRow = (String, String, Option<String>, Option<String>, bool);

/// The engine new deliveries are offered to, set once it runs, shared by the store's clones.
pub(super) type HandoffSlot = Arc<RwLock<Option<Taker>>>;

/// An engine taking new deliveries, and whether the room it is given counts every process's
/// attempts (see [`PgStore::with_cluster_limits`](super::PgStore::with_cluster_limits)).
#[derive(Clone)]
pub(super) struct Taker {
    pub(super) handoff: Weak<dyn Handoff>,
    pub(super) cluster_limits: bool,
}

impl std::fmt::Debug for Taker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taker")
            .field("cluster_limits", &self.cluster_limits)
            .finish_non_exhaustive()
    }
}

/// Most publishes one transaction takes; bounds the wait a batch adds for its last caller.
const MAX_BATCH: usize = 256;

/// The publish task's queue; see the module doc.
#[derive(Clone, Debug)]
pub(super) struct Publisher {
    queue: mpsc::UnboundedSender<Publish>,
}

impl Publisher {
    /// Starts the publish task of `pool` on the current runtime.
    pub(super) fn start(pool: PgPool, taker: HandoffSlot) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        tokio::spawn(publish_loop(pool, taker, waiting));
        Self { queue }
    }

    /// Writes `message` routed by `route` in the next batch; see
    /// [`crate::MessageStore::publish`].
    pub(super) async fn publish(
        &self,
        message: Message,
        route: Route,
    ) -> Result<CreatedMessage, StoreError> {
        let (reply, answer) = oneshot::channel();
        let publish = Publish {
            message,
            route,
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

    /// Answers from the batch's outcome: written with this many deliveries, of them this
    /// many left queued, or `None` when its `eventId` was taken.
    fn answer_written(self, deliveries: Option<(usize, usize)>) {
        let Publish { message, reply, .. } = self;
        let outcome = match deliveries {
            Some((deliveries, queued)) => Ok(CreatedMessage {
                message,
                deliveries,
                queued,
            }),
            None => Err(StoreError::Conflict(taken::event_id(
                message.event_id.as_deref(),
            ))),
        };
        let _ = reply.send(outcome);
    }
}

/// Takes the publishes waiting, a batch at a time, until every [`Publisher`] is dropped.
async fn publish_loop(
    pool: PgPool,
    taker: HandoffSlot,
    mut waiting: mpsc::UnboundedReceiver<Publish>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let held = Held::new(pool.clone());
    // Waits for one publish, then takes those already waiting with it; 0 once closed.
    while waiting.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let taker = taker.read().expect("handoff lock poisoned").clone();
        write(&pool, &held, taker, std::mem::take(&mut batch)).await;
    }
}

/// Writes one batch on the task's kept connection and answers each of its callers.
async fn write(pool: &PgPool, held: &Held, taker: Option<Taker>, batch: Vec<Publish>) {
    let candidates = candidates(&batch);
    let handoff = taker.as_ref().and_then(|t| t.handoff.upgrade());
    let written = candidates.iter().map(|&i| &batch[i]);
    let read = async {
        let mut conn = held.take().await?;
        let subscribers = subscribers_of(&mut conn, written, handoff.is_some()).await?;
        Ok::<_, StoreError>((conn, subscribers))
    };
    let (mut conn, subscribers) = match read.await {
        Ok(read) => read,
        // Each message written alone reads its own (and fails at once if the database is
        // gone).
        Err(error) => {
            log_refused(&error, batch.len());
            return write_each(pool, batch).await;
        }
    };
    let (routes, rooms) = route(&batch, &candidates, &subscribers, handoff.as_deref());
    let limits = Limits {
        per_endpoint: handoff.as_deref().map_or(0, Handoff::per_endpoint),
        cluster: taker.is_none_or(|t| t.cluster_limits),
    };
    let inserted = insert_batch(&mut conn, &batch, &candidates, &routes, limits).await;
    if inserted.is_ok() {
        conn.keep();
    } else {
        drop(conn);
    }
    match inserted {
        Ok(written) => {
            let counts = routes.counts;
            answer(batch, &written, counts, rooms, &subscribers);
        }
        // The server refused the statement: nothing of it was written.
        Err(error) if error.as_database_error().is_some() => {
            log_refused(&error, batch.len());
            drop(rooms);
            write_each(pool, batch).await
        }
        // The connection failed: the statement may have been committed, so writing the
        // messages again could answer a written one with a conflict.
        Err(error) => fail(batch, &error),
    }
}

/// Room the engine holds for one new delivery: (publish, endpoint, room).
type Room<'a> = (usize, &'a str, Reserved);

/// The deliveries of the publishes at `candidates`, each offered to `handoff` if its endpoint
/// is an enabled one of the application (whose row was read), with the room it reserved.
fn route<'a, 's: 'a>(
    batch: &'a [Publish],
    candidates: &[usize],
    subscribers: &'s Subscribers,
    handoff: Option<&dyn Handoff>,
) -> (Routes<'a>, Vec<Room<'s>>) {
    let mut routes = Routes::new(batch.len());
    let mut rooms = Vec::new();
    for &i in candidates {
        let Publish { message, route, .. } = &batch[i];
        routes.counts[i] = Some(0);
        for delivery in routed(message, route, subscribers.of(message)) {
            let reserved = handoff.and_then(|handoff| {
                let (id, row) = subscribers.endpoints.get_key_value(delivery.endpoint)?;
                Some((id.as_str(), handoff.reserve(&row.id)?))
            });
            let lease = reserved.as_ref().map(|(_, room)| room.lease_until());
            routes.add(i, message, delivery, lease);
            rooms.extend(reserved.map(|(endpoint, room)| (i, endpoint, room)));
        }
    }
    (routes, rooms)
}

/// Hands off the deliveries written claimed, frees the room of those that were not (their
/// endpoint had none left across the processes), and answers every caller.
fn answer(
    batch: Vec<Publish>,
    written: &Written,
    counts: Vec<Option<usize>>,
    rooms: Vec<Room<'_>>,
    subscribers: &Subscribers,
) {
    let mut queued: Vec<usize> = counts.iter().map(|c| c.unwrap_or(0)).collect();
    for (i, endpoint, room) in rooms {
        let message = &batch[i].message;
        if written.claimed(message, endpoint) {
            queued[i] -= 1;
            let lease = room.lease_until();
            room.start(handed(message, &subscribers.endpoints[endpoint], lease));
        }
    }
    for ((publish, count), queued) in batch.into_iter().zip(counts).zip(queued) {
        // Candidates have distinct ids once their insert succeeded (the primary key), so an
        // id inserted names one position; a candidate not inserted lost its `eventId` to a
        // stored message.
        let written = count
            .filter(|_| written.messages.contains(publish.message.id.as_str()))
            .map(|count| (count, queued));
        publish.answer_written(written);
    }
}

/// The claimed delivery of `message` to `endpoint` that `publish_batch` wrote, leased until
/// `lease`.
fn handed(message: &Message, endpoint: &Endpoint, lease: Timestamp) -> ClaimedDelivery {
    ClaimedDelivery {
        delivery: Delivery {
            ordering_key: endpoint.ordering_key_of(message),
            message_id: message.id.clone(),
            endpoint_id: endpoint.id.clone(),
            status: DeliveryStatus::Sending,
            attempt_count: 0,
            next_attempt_at: Some(lease),
            updated_at: message.created_at,
        },
        message: message.clone(),
        endpoint: endpoint.clone(),
        manual: false,
    }
}

/// The deliveries of a batch, as `publish_batch` takes them.
struct Routes<'a> {
    message_ids: Vec<&'a str>,
    endpoint_ids: Vec<&'a str>,
    due: Vec<i64>,
    /// The end of the lease of a delivery the engine asked for, written `sending`.
    leases: Vec<Option<i64>>,
    ordering_keys: Vec<Option<String>>,
    /// Deliveries per publish of the batch (`None`: not a candidate, its `eventId` repeated).
    counts: Vec<Option<usize>>,
}

impl<'a> Routes<'a> {
    /// No deliveries yet, for a batch of `len` publishes.
    fn new(len: usize) -> Self {
        Self {
            message_ids: Vec::new(),
            endpoint_ids: Vec::new(),
            due: Vec::new(),
            leases: Vec::new(),
            ordering_keys: Vec::new(),
            counts: vec![None; len],
        }
    }

    /// Adds a delivery of publish `i`'s `message`, asked for by the engine under a lease until
    /// `lease`, if any.
    fn add(
        &mut self,
        i: usize,
        message: &'a Message,
        delivery: Routed<'a>,
        lease: Option<Timestamp>,
    ) {
        *self.counts[i].get_or_insert(0) += 1;
        self.message_ids.push(message.id.as_str());
        self.endpoint_ids.push(delivery.endpoint);
        self.due.push(message.created_at.as_millis());
        self.leases.push(lease.map(Timestamp::as_millis));
        self.ordering_keys.push(delivery.ordering_key);
    }
}

/// The room a batch's deliveries are handed off within (see migration 0010).
#[derive(Clone, Copy)]
struct Limits {
    per_endpoint: usize,
    cluster: bool,
}

/// What `publish_batch` wrote: the messages (those whose `eventId` was free) and the
/// deliveries it wrote claimed, as endpoints by message.
struct Written {
    messages: HashSet<String>,
    claimed: HashMap<String, Vec<String>>,
}

impl Written {
    /// Whether the delivery of `message` to `endpoint` was written claimed.
    fn claimed(&self, message: &Message, endpoint: &str) -> bool {
        self.claimed
            .get(message.id.as_str())
            .is_some_and(|endpoints| endpoints.iter().any(|e| e == endpoint))
    }
}

/// Inserts the messages of the publishes at `positions` (skipping those whose `eventId` is
/// taken) and the deliveries of those inserted, in one statement and so one transaction of
/// its own, handing off the deliveries asked for within their endpoints' room.
async fn insert_batch(
    conn: &mut PgConnection,
    batch: &[Publish],
    positions: &[usize],
    routes: &Routes<'_>,
    limits: Limits,
) -> Result<Written, sqlx::Error> {
    let messages: Vec<&Message> = positions.iter().map(|&i| &batch[i].message).collect();
    // The batch's time, for the leases still live: its newest message's (the API's clock).
    let now = messages.iter().map(|m| m.created_at).max();
    let rows = sqlx::query(PUBLISH)
        .bind(column(&messages, |m| m.id.as_str()))
        .bind(column(&messages, |m| m.app_id.as_str()))
        .bind(column(&messages, |m| m.event_type.as_str()))
        .bind(column(&messages, |m| m.event_id.as_deref()))
        .bind(column(&messages, |m| encode_opt(m.channels.as_ref())))
        .bind(column(&messages, |m| m.payload.as_deref()))
        .bind(column(&messages, |m| m.created_at.as_millis()))
        .bind(column(&messages, |m| m.ordering_key.as_deref()))
        .bind(column(&messages, |m| encode_opt(m.tags.as_ref())))
        .bind(&routes.message_ids)
        .bind(&routes.endpoint_ids)
        .bind(&routes.due)
        .bind(&routes.leases)
        .bind(&routes.ordering_keys)
        .bind(now.map_or(0, Timestamp::as_millis))
        .bind(i64::try_from(limits.per_endpoint).unwrap_or(i64::MAX))
        .bind(limits.cluster)
        .fetch_all(conn)
        .await?;
    let mut written = Written {
        messages: HashSet::new(),
        claimed: HashMap::new(),
    };
    for row in rows {
        let id: String = row.try_get(0)?;
        match row.try_get::<Option<String>, _>(1)? {
            Some(endpoint) => written.claimed.entry(id).or_default().push(endpoint),
            None => {
                written.messages.insert(id);
            }
        }
    }
    Ok(written)
}

/// A batch in one statement (see migration 0010): the messages, then their deliveries, those
/// asked for written claimed within their endpoints' room.
const PUBLISH: &str = "SELECT written_id, claimed_endpoint
    FROM publish_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)";

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

/// The enabled endpoints of the applications a batch publishes to.
struct Subscribers {
    by_app: HashMap<String, Vec<Subscriber>>,
    /// The whole rows, by id; read only when an engine may take the deliveries.
    endpoints: HashMap<String, Endpoint>,
}

impl Subscribers {
    fn add(&mut self, app_id: String, subscriber: Subscriber) {
        self.by_app.entry(app_id).or_default().push(subscriber);
    }

    /// The subscribers of `message`'s application.
    fn of(&self, message: &Message) -> &[Subscriber] {
        self.by_app
            .get(message.app_id.as_str())
            .map_or(&[][..], Vec::as_slice)
    }
}

/// The enabled endpoints of every application the `written` publishes route to subscribers,
/// in one read: whole rows when an engine may be handed their deliveries (`whole`), else only
/// what routing reads.
async fn subscribers_of(
    conn: &mut PgConnection,
    written: impl Iterator<Item = &Publish>,
    whole: bool,
) -> Result<Subscribers, StoreError> {
    let mut apps: Vec<&str> = written
        .filter(|p| p.route == Route::Subscribers)
        .map(|p| p.message.app_id.as_str())
        .collect();
    apps.sort_unstable();
    apps.dedup();
    let mut subscribers = Subscribers {
        by_app: HashMap::new(),
        endpoints: HashMap::new(),
    };
    if apps.is_empty() {
        return Ok(subscribers);
    }
    if whole {
        let rows = sqlx::query(AssertSqlSafe(SUBSCRIBERS.as_str()))
            .bind(&apps)
            .fetch_all(&mut *conn)
            .await?;
        for row in rows {
            let endpoint = rows::endpoint(&row)?;
            subscribers.add(endpoint.app_id.to_string(), Subscriber::of(&endpoint));
            subscribers
                .endpoints
                .insert(endpoint.id.to_string(), endpoint);
        }
    } else {
        let rows: Vec<FilterRow> = sqlx::query_as(AssertSqlSafe(SUBSCRIBER_FILTERS.as_str()))
            .bind(&apps)
            .fetch_all(conn)
            .await?;
        for (app_id, id, event_types, channels, strict) in rows {
            let subscriber = Subscriber::decode((id, event_types, channels, strict))?;
            subscribers.add(app_id, subscriber);
        }
    }
    Ok(subscribers)
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
