//! `hookd-bench storage`: what hookd's store costs per delivered message, without HTTP.
//!
//! The `deliver` benchmark's hookd figure holds two HTTP exchanges, the API, signing and the
//! store together. This one runs hookd's own store (`hookd_store::open`, as `hookd serve`
//! opens it) in this process and drives it as the API and the engine do for a message
//! delivered at its first attempt: `--concurrency` publishes in flight, each message's delivery
//! taken as it is written (as the engine's handoff takes it) and its successful attempt recorded
//! in batches of whatever finished meanwhile (as the engine's recorder writes them). What is
//! counted is CPU time per delivered message: this process's (the store's threads and the few
//! tasks standing in for the API and the engine) and, on PostgreSQL, the server's processes
//! for the run's database.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, SealedKeys, TriggerType,
};
use hookd_core::{AppId, AttemptId, Clock, EndpointId, MessageId, SystemClock};
use hookd_store::{AttemptRecord, ClaimedDelivery, Handoff, NewMessage, Recorded, Reserved, Store};
use tokio::sync::{mpsc, watch};

use crate::hookd::{Backend, Backends, Database, PostgresServer};
use crate::machine::{self, Machine, PostgresCpu, process_cpu_time, used_since};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "storage";

/// How long a taken delivery stays claimed unless its attempt is recorded (the engine's lease).
const LEASE: Duration = Duration::from_secs(30);

/// Most attempts one record batch takes, as the engine's recorder.
const RECORD_BATCH: usize = 1024;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run the store on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "both")]
    backend: Backends,
    /// Messages published and recorded in the measured phase.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Messages published and recorded first, not measured.
    #[arg(long, default_value_t = 5_000)]
    warmup: u64,
    /// Publishes in flight.
    #[arg(long, default_value_t = 128)]
    concurrency: usize,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench storage --backend {} --messages {} --warmup {} \
             --concurrency {}{}",
            self.backend.flag(),
            self.messages,
            self.warmup,
            self.concurrency,
            self.output.flags()
        )
    }
}

/// One backend's measured phase.
struct Run {
    backend: Backend,
    messages: u64,
    elapsed: Duration,
    /// This process's CPU time.
    store: Duration,
    /// The PostgreSQL processes' CPU time, on PostgreSQL.
    postgres: Option<Duration>,
    /// Records that did not write (`Gone` or `Stale`): none are expected.
    unwritten: u64,
}

impl Run {
    fn per_message(&self, cpu: Duration) -> String {
        format!(
            "{:.1} µs",
            cpu.as_secs_f64() * 1e6 / self.messages.max(1) as f64
        )
    }

    fn row(&self) -> String {
        let postgres = self
            .postgres
            .map_or("–".to_owned(), |t| self.per_message(t));
        let total = self.store + self.postgres.unwrap_or_default();
        report::row(&[
            self.backend.name().to_owned(),
            report::thousands(self.messages),
            report::thousands((self.messages as f64 / self.elapsed.as_secs_f64()) as u64),
            self.per_message(self.store),
            postgres,
            self.per_message(total),
            report::flagged(self.unwritten),
        ])
    }
}

fn header() -> String {
    report::header(&[
        "backend",
        "messages",
        "messages/s",
        "CPU per message: this process",
        "PostgreSQL",
        "both",
        "records not written",
    ])
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.messages == 0 || args.concurrency == 0 {
        bail!("--messages and --concurrency must be at least 1");
    }
    let machine = Machine::announced();
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        machine::settle(args.output.quiet_below).await?;
        let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
            measure(backend, database, &args).await
        })
        .await?;
        println!("{}", run.row());
        runs.push(run);
    }
    let rows = runs.iter().map(Run::row);
    args.output.write(
        SECTION,
        &report::table_section(&method(&args), &args.command(), &machine, &header(), rows),
    )?;
    if runs.iter().any(|r| r.unwritten > 0) {
        eprintln!("FLAGGED: attempts that were not recorded");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn method(args: &Args) -> String {
    format!(
        "hookd's store alone, in the benchmark's own process, driven as the API and the engine \
         drive it for a message delivered at its first attempt: {} publishes in flight to one \
         application with one endpoint, each delivery taken as it is written (written claimed, \
         as the engine's handoff takes it) and its successful attempt recorded in batches of \
         whatever finished meanwhile (up to {RECORD_BATCH}, as the engine's recorder). No HTTP, \
         no signing. Counted over {} messages after {} not counted: this process's CPU time (the \
         store's threads, and the tasks standing in for the API and the engine) and, on \
         PostgreSQL, that of the server's processes for the run's database, per message.\n",
        args.concurrency,
        report::thousands(args.messages),
        report::thousands(args.warmup)
    )
}

async fn measure(backend: Backend, database: &Database, args: &Args) -> anyhow::Result<Run> {
    let store = hookd_store::open(database.url())
        .await
        .context("cannot open hookd's store")?;
    let app = subscriber(store.as_ref()).await?;
    let (taken, finished) = mpsc::unbounded_channel();
    let taker: Arc<dyn Handoff> = Arc::new(Taker { taken });
    store.hand_off_new_deliveries(Arc::downgrade(&taker) as Weak<dyn Handoff>);
    let (progress, mut recorded) = watch::channel(Recording::default());
    let recorder = tokio::spawn(record(store.clone(), finished, progress));

    publish(&store, &app, 0..args.warmup, args.concurrency).await?;
    recorded
        .wait_for(|r| r.written + r.unwritten >= args.warmup)
        .await?;
    let mut postgres = match backend {
        Backend::Postgres => Some(PostgresCpu::connect(database.url()).await?),
        Backend::Sqlite => None,
    };
    let postgres_before = match postgres.as_mut() {
        Some(cpu) => Some(cpu.read().await?),
        None => None,
    };
    let (started, cpu_before) = (Instant::now(), process_cpu_time(std::process::id())?);
    let end = args.warmup + args.messages;
    publish(&store, &app, args.warmup..end, args.concurrency).await?;
    let last = *recorded
        .wait_for(|r| r.written + r.unwritten >= end)
        .await?;
    let (elapsed, cpu_after) = (started.elapsed(), process_cpu_time(std::process::id())?);
    let postgres_used = match (postgres.as_mut(), postgres_before) {
        (Some(cpu), Some(before)) => Some(used_since(&cpu.read().await?, &before)),
        _ => None,
    };
    if let Some(cpu) = postgres {
        cpu.close().await;
    }
    recorder.abort();
    Ok(Run {
        backend,
        messages: args.messages,
        elapsed,
        store: cpu_after.saturating_sub(cpu_before),
        postgres: postgres_used,
        unwritten: last.unwritten,
    })
}

/// An application with one endpoint subscribed to everything.
async fn subscriber(store: &dyn Store) -> anyhow::Result<AppId> {
    let now = SystemClock.now();
    let app = Application {
        id: AppId::new(now),
        uid: None,
        name: "storage".into(),
        metadata: BTreeMap::new(),
        throttle_rate: None,
        envelope: false,
        created_at: now,
        updated_at: now,
    };
    store.create_app(&app).await?;
    let endpoint = Endpoint {
        id: EndpointId::new(now),
        app_id: app.id.clone(),
        uid: None,
        url: "http://127.0.0.1:9/hook".into(),
        description: "hookd-bench storage".into(),
        event_types: None,
        channels: None,
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: None,
        timeout_secs: None,
        max_concurrency: None,
        ordering: Default::default(),
        metadata: BTreeMap::new(),
        headers: BTreeMap::new(),
        // The store keeps keys sealed and never opens them.
        keys: SealedKeys::from_stored("hk1:bench:sealed".into()),
        created_at: now,
        updated_at: now,
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
    };
    store.create_endpoint(&endpoint).await?;
    Ok(app.id)
}

/// Publishes messages `numbers`, `concurrency` at a time, each of whose delivery must be taken.
async fn publish(
    store: &Arc<dyn Store>,
    app: &AppId,
    numbers: std::ops::Range<u64>,
    concurrency: usize,
) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(numbers.start));
    let publishers = (0..concurrency).map(|_| {
        let (store, app, next) = (store.clone(), app.clone(), next.clone());
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= numbers.end {
                    return anyhow::Ok(());
                }
                let created = store.publish(NewMessage::new(message(&app, i))).await?;
                if created.queued > 0 {
                    bail!("a delivery was left to a claim: this benchmark takes every one");
                }
            }
        })
    });
    for publisher in publishers.collect::<Vec<_>>() {
        publisher.await??;
    }
    Ok(())
}

/// Message `i`, with the payload the `deliver` benchmark publishes.
fn message(app: &AppId, i: u64) -> Message {
    let now = SystemClock.now();
    Message {
        id: MessageId::new(now),
        app_id: app.clone(),
        event_type: "invoice.paid".into(),
        event_id: None,
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(
            crate::publish::message(i)["payload"]
                .to_string()
                .into_bytes(),
        ),
        created_at: now,
    }
}

/// Takes every new delivery, as the engine takes those it has room for.
struct Taker {
    taken: mpsc::UnboundedSender<ClaimedDelivery>,
}

impl Handoff for Taker {
    fn reserve(&self, _endpoint: &EndpointId) -> Option<Reserved> {
        let taken = self.taken.clone();
        Some(Reserved::new(
            SystemClock.now().plus(LEASE),
            move |claimed| {
                let _ = taken.send(claimed);
            },
        ))
    }

    fn per_endpoint(&self) -> usize {
        1 << 20
    }
}

/// Attempts recorded so far.
#[derive(Clone, Copy, Debug, Default)]
struct Recording {
    written: u64,
    unwritten: u64,
}

/// Records a successful attempt of each delivery taken, in batches of what waits.
async fn record(
    store: Arc<dyn Store>,
    mut finished: mpsc::UnboundedReceiver<ClaimedDelivery>,
    progress: watch::Sender<Recording>,
) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    let mut so_far = Recording::default();
    while finished.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        let records: Vec<AttemptRecord> = batch.drain(..).map(succeeded).collect();
        for recorded in store.record_attempts(&records).await? {
            match recorded {
                Recorded::Written { .. } => so_far.written += 1,
                Recorded::Gone | Recorded::Stale => so_far.unwritten += 1,
            }
        }
        progress.send_replace(so_far);
    }
    Ok(())
}

/// The record of `claimed`'s first attempt, answered 200 at once.
fn succeeded(claimed: ClaimedDelivery) -> AttemptRecord {
    let now = SystemClock.now();
    let delivery = claimed.delivery;
    AttemptRecord {
        attempt: Attempt {
            id: AttemptId::new(now),
            message_id: delivery.message_id.clone(),
            endpoint_id: delivery.endpoint_id.clone(),
            url: claimed.endpoint.url,
            response_status_code: 200,
            response: String::new(),
            response_head: "HTTP/1.1 200 OK\r\ncontent-length: 0".into(),
            response_duration_ms: 1,
            status: DeliveryStatus::Success,
            trigger_type: TriggerType::Scheduled,
            created_at: now,
        },
        lease: delivery.next_attempt_at,
        next: Delivery {
            status: DeliveryStatus::Success,
            attempt_count: delivery.attempt_count + 1,
            next_attempt_at: None,
            updated_at: now,
            ..delivery
        },
        hold_until: None,
        events: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Storage(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
