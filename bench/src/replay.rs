//! `hookd-bench replay`: how fast `replay-missing` sends an endpoint the history it missed, and
//! what that costs the publishers meanwhile.
//!
//! An endpoint added to an application with a history has missed all of it;
//! `POST /app/{app}/endpoint/{id}/replay-missing` starts a background task that queues it every
//! message it never had. The engine's task runner does that 1,000 messages a transaction, so a
//! publish should wait for one chunk at most. For each backend, hookd at its defaults on a
//! fresh database:
//!
//! 1. `--messages` are published (`--concurrency` in flight) to an application without
//!    endpoints, so nothing is delivered; then one endpoint is added, aimed at a verifying
//!    receiver process.
//! 2. A second application, with an endpoint of its own, gets single publishes at `--rate`
//!    (open loop) from then on; `--baseline-seconds` of them give the latency before the
//!    replay.
//! 3. `replay-missing` starts with `since` before the first message. `GET
//!    /background-task/{id}` is polled every 50 ms until it says `finished`, then the
//!    receiver's count until it has every message. The publishes go on meanwhile: their
//!    latency while the task runs, and from then until the replay is delivered.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::api::Api;
use crate::cluster::verified_endpoint;
use crate::deliver::drain;
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::load::{self, Outcome, Requests};
use crate::machine::{self, Machine};
use crate::receiver::{self, Receiver, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "replay";

/// How often the task is looked at.
const POLL: Duration = Duration::from_millis(50);

/// The longest the task may run before the run gives up on it.
const TASK_PATIENCE: Duration = Duration::from_secs(600);

/// The longest the replayed messages may take to arrive, from the task's end, before the run
/// gives up waiting (the ones missing then show in the table).
const DELIVERY_PATIENCE: Duration = Duration::from_secs(600);

/// Paced publishes in flight at most, as an application's connection pool would allow.
const CONNECTIONS: usize = 64;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Messages published before the endpoint exists: what the replay sends it.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Publishes in flight while those messages are published.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Single publishes per second to the second application (open loop).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds of those publishes before the replay starts: the baseline.
    #[arg(long, default_value_t = 5)]
    baseline_seconds: u64,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench replay --backend {} --messages {} --concurrency {} \
             --rate {} --baseline-seconds {}{}",
            self.backend.flag(),
            self.messages,
            self.concurrency,
            self.rate,
            self.baseline_seconds,
            self.output.flags()
        )
    }
}

/// One backend's run.
struct Run {
    backend: Backend,
    messages: u64,
    /// The finished task's `messagesSent`.
    sent: u64,
    /// From starting the replay until the task was seen `finished`.
    task: Duration,
    /// From starting the replay until the receiver had every message, if it did.
    delivered: Option<Duration>,
    /// Published messages the receiver never got.
    missing: u64,
    bad_signatures: u64,
    /// The second application's publishes before the replay,
    before: Outcome,
    /// while its task ran,
    during_task: Outcome,
    /// and from then until the receiver had every replayed message.
    delivering: Outcome,
}

impl Run {
    fn replayed_per_s(&self) -> f64 {
        self.messages as f64 / self.task.as_secs_f64().max(1e-9)
    }

    fn phases(&self) -> [(&'static str, &Outcome); 3] {
        [
            ("before", &self.before),
            ("while the task ran", &self.during_task),
            ("until delivered", &self.delivering),
        ]
    }

    fn flagged(&self) -> bool {
        let errors: u64 = self.phases().iter().map(|(_, o)| o.error_count()).sum();
        self.sent != self.messages || self.missing + self.bad_signatures + errors > 0
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.messages == 0 || args.concurrency == 0 || args.rate <= 0.0 || args.baseline_seconds == 0
    {
        bail!("--messages, --concurrency, --rate and --baseline-seconds must be above 0");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        machine::settle(args.output.quiet_below).await?;
        let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
            measure(backend, database, &args).await
        })
        .await?;
        println!("{}", row(&run));
        for (phase, outcome) in run.phases() {
            for (reason, n) in &outcome.errors {
                eprintln!("  publishes {phase}: {n} × {reason}");
            }
        }
        runs.push(run);
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    if runs.iter().any(Run::flagged) {
        eprintln!(
            "FLAGGED: the replay sent or delivered fewer messages than published, or publishes failed"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// One run on a fresh `database`: the history, the endpoint, the baseline, then the replay
/// beside the publishes.
async fn measure(backend: Backend, database: &Database, args: &Args) -> anyhow::Result<Run> {
    let url = database.url().to_owned();
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &[])).await??;
    let api = Api::new(&hookd, CONNECTIONS.max(args.concurrency))?;
    let since = crate::search::now()
        .minus(Duration::from_secs(60))
        .to_rfc3339();
    let app = publish_history(&api, args).await?;
    let (endpoint, receiver) = verified_endpoint(&api, &app, "replay").await?;

    let (_live, publish) = live_publishes(&api).await?;
    let baseline = (args.rate * args.baseline_seconds as f64).round() as u64;
    let before = load::run_paced(args.rate, CONNECTIONS, 0..baseline, publish.clone()).await;

    let started = Instant::now();
    let task = api.replay_missing(&app, &endpoint, &since).await?;
    let (watched, during_task, delivering) =
        beside_publishes(&api, &task, started, &receiver, publish, args).await;
    let watched = watched?;
    let receipts = receiver.results().await?;
    hookd.stop();
    if receipts.duplicates > 0 {
        eprintln!("  the receiver got {} messages twice", receipts.duplicates);
    }
    Ok(Run {
        backend,
        messages: args.messages,
        sent: watched.sent,
        task: watched.task,
        delivered: watched.delivered,
        missing: args
            .messages
            .saturating_sub(receipts.first_seen.len() as u64),
        bad_signatures: receipts.bad_signatures,
        before,
        during_task,
        delivering,
    })
}

/// Watches the replay (task `task`, started at `started`) while `publish` goes on at
/// `--rate`; returns what the watch saw, the publishes while the task ran, and those from then
/// until the receiver had every message.
async fn beside_publishes(
    api: &Api,
    task: &str,
    started: Instant,
    receiver: &ReceiverProcess,
    publish: Requests,
    args: &Args,
) -> (anyhow::Result<Watched>, Outcome, Outcome) {
    let (task_done, all_delivered) = (AtomicBool::new(false), AtomicBool::new(false));
    let publishing = async {
        let during_task =
            load::run_paced_while(args.rate, CONNECTIONS, 0..u64::MAX, publish.clone(), || {
                !task_done.load(Ordering::Relaxed)
            })
            .await;
        let delivering =
            load::run_paced_while(args.rate, CONNECTIONS, 0..u64::MAX, publish.clone(), || {
                !all_delivered.load(Ordering::Relaxed)
            })
            .await;
        (during_task, delivering)
    };
    let watching = async {
        let watched = watch(api, task, receiver, args.messages, started, &task_done).await;
        // Whatever came of it, the publishes stop.
        task_done.store(true, Ordering::Relaxed);
        all_delivered.store(true, Ordering::Relaxed);
        watched
    };
    let ((during_task, delivering), watched) = tokio::join!(publishing, watching);
    (watched, during_task, delivering)
}

/// A second application with an endpoint aimed at a plain receiver on this runtime (keep it
/// while publishing), and the single publishes to it.
async fn live_publishes(api: &Api) -> anyhow::Result<(Receiver, Requests)> {
    let live = Receiver::start(receiver::Options::default()).await?;
    let app = api.create_app("live").await?;
    api.create_endpoint(&app, &live.url("live")).await?;
    Ok((live, api.publisher(&app, None)?))
}

/// Publishes `--messages` to a new application without endpoints; returns its id.
async fn publish_history(api: &Api, args: &Args) -> anyhow::Result<String> {
    let app = api.create_app("replayed").await?;
    let published = load::run(
        args.concurrency,
        0..args.messages,
        api.publisher(&app, None)?,
    )
    .await;
    if published.error_count() > 0 {
        bail!(
            "{} of the history's publishes failed: {:?}",
            published.error_count(),
            published.errors
        );
    }
    println!(
        "  published {} messages at {} msgs/s",
        report::thousands(args.messages),
        report::thousands(published.throughput().round() as u64)
    );
    Ok(app)
}

/// What [`watch`] saw, timed from the replay's start.
struct Watched {
    task: Duration,
    /// The finished task's `messagesSent`.
    sent: u64,
    delivered: Option<Duration>,
}

/// Waits for task `id` to finish (then raises `task_done`) and for the receiver to have
/// `expected` messages.
async fn watch(
    api: &Api,
    id: &str,
    receiver: &ReceiverProcess,
    expected: u64,
    started: Instant,
    task_done: &AtomicBool,
) -> anyhow::Result<Watched> {
    let sent = until_finished(api, id).await?;
    let task = started.elapsed();
    task_done.store(true, Ordering::Relaxed);
    match tokio::time::timeout(DELIVERY_PATIENCE, drain(receiver, expected)).await {
        Ok(drained) => drained?,
        Err(_) => eprintln!("warning: replayed messages still missing after {DELIVERY_PATIENCE:?}"),
    }
    let at = started.elapsed();
    let delivered = (receiver.count().await? >= expected).then_some(at);
    Ok(Watched {
        task,
        sent,
        delivered,
    })
}

/// Polls task `id` every [`POLL`] until it is `finished`; returns its `messagesSent`. Fails if
/// it failed, or still runs after [`TASK_PATIENCE`].
async fn until_finished(api: &Api, id: &str) -> anyhow::Result<u64> {
    let deadline = Instant::now() + TASK_PATIENCE;
    loop {
        let task = api.background_task(id).await?;
        match task["status"].as_str() {
            Some("finished") => {
                return task["data"]["messagesSent"]
                    .as_u64()
                    .with_context(|| format!("no messagesSent in {task}"));
            }
            Some("running") if Instant::now() < deadline => tokio::time::sleep(POLL).await,
            _ => bail!("the replay task did not finish: {task}"),
        }
    }
}

fn header() -> String {
    report::header(&[
        "backend",
        "replayed",
        "task",
        "replayed/s",
        "all delivered in",
        "publish p50 / p99 / max (publishes): before",
        "while the task runs",
        "until delivered",
    ])
}

fn row(run: &Run) -> String {
    let replayed = if run.sent == run.messages {
        report::thousands(run.sent)
    } else {
        format!(
            "**{} of {} (flagged)**",
            report::thousands(run.sent),
            report::thousands(run.messages)
        )
    };
    let delivered = match run.delivered {
        Some(took) if run.bad_signatures == 0 => format!("{:.1} s", took.as_secs_f64()),
        _ => format!(
            "{} missing, {} bad signatures",
            report::flagged(run.missing),
            report::flagged(run.bad_signatures)
        ),
    };
    report::row(&[
        run.backend.name().to_owned(),
        replayed,
        format!("{:.2} s", run.task.as_secs_f64()),
        report::thousands(run.replayed_per_s().round() as u64),
        delivered,
        latencies(&run.before),
        latencies(&run.during_task),
        latencies(&run.delivering),
    ])
}

/// A phase's publishes: p50 / p99 / max, and how many (`1.10 / 7.02 / 9.31 ms (1,000)`).
fn latencies(outcome: &Outcome) -> String {
    if outcome.completed == 0 {
        return "–".to_owned();
    }
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let failed = match outcome.error_count() {
        0 => String::new(),
        n => format!(", {} failed", report::flagged(n)),
    };
    format!(
        "{} / {} / {} ms ({}{failed})",
        ms(outcome.latency(0.50)),
        ms(outcome.latency(0.99)),
        ms(outcome.max_latency()),
        report::thousands(outcome.completed)
    )
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Replaying what an endpoint missed\n\n\
         `replay-missing` for an endpoint added to an application after {} messages were \
         published to it ({} in flight, so nothing was delivered): a background task queues \
         each of them to the endpoint, 1,000 messages a transaction, and the engine delivers \
         them to the verifying receiver. The task's time runs from the request until `GET \
         /background-task/{{id}}`, polled every 50 ms, says `finished` (replayed/s is the \
         messages over it); all delivered, until the receiver had every message. A second \
         application with its own endpoint gets single publishes at {}/s (open loop) \
         throughout: their latency for {} s before the replay, while its task runs, and from \
         then until the replay is delivered.\n",
        report::thousands(args.messages),
        args.concurrency,
        args.rate,
        args.baseline_seconds,
    )
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, runs: &[Run]) -> String {
    report::table_section(
        &method(args),
        &args.command(),
        machine,
        &header(),
        runs.iter().map(row),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Replay(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
