//! `hookd-bench destinations`: how fast hookd fills a RabbitMQ queue and serves a polling
//! consumer, against how fast it delivers to an HTTP endpoint in the same run.
//!
//! Three phases at hookd's defaults on SQLite, each on a fresh hookd and database, each the
//! same closed loop of publishes to one application with one endpoint or destination:
//!
//! - **HTTP endpoint**: [`crate::deliver`]'s throughput mode, its receiver process verifying
//!   every signature; deliveries/s from the first publish to the last receipt.
//! - **`rabbitMq`**: a destination publishing to a queue made for the run on the broker at
//!   `--rabbitmq-url` (deleted after); a consumer in this process verifies each message's
//!   signature from its headers and stamps its first arrival; messages/s from the first
//!   publish to the last arrival.
//! - **`pollingEndpoint`**: a consumer polls while the messages are published, following the
//!   iterator, and stamps when it first reads each: the publish-to-read lag, which holds the
//!   5 seconds a message waits before a poll serves it. Once it has read them all, a second
//!   pass reads them again from the start, one poll after another: the consumer's read rate
//!   over settled messages.
//!
//! A message missing, a bad signature or a failed publish flags the run.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lapin::message::{Delivery, DeliveryResult};
use lapin::options::{BasicConsumeOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use serde_json::json;
use webhook_signature::Verifier;

use crate::api::{Api, unix_nanos};
use crate::deliver::{self, Arrivals, Mode, Plan, Run};
use crate::hookd::{Backend, DEFAULT_POSTGRES_URL, Database, Hookd, Setting, random_hex};
use crate::machine::{self, Machine};
use crate::receiver::{self, Receipts};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "destinations";

/// The broker used when none is given: the one the tests use.
const DEFAULT_RABBITMQ_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// Messages a poll asks for: the most a poll answers.
const POLL_LIMIT: usize = 250;

/// How long the polling consumer waits after a poll that read everything settled.
const POLL_PAUSE: Duration = Duration::from_millis(100);

/// The polling consumer gives up after this long without reading a new message.
const POLL_PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Messages published in each phase's measured part.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Publishes in flight at all times.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Messages published (and delivered) first to the HTTP endpoint and to RabbitMQ, not
    /// measured.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// The RabbitMQ broker the destination publishes to and this process consumes from.
    #[arg(
        long,
        env = "HOOKD_TEST_RABBITMQ_URL",
        default_value = DEFAULT_RABBITMQ_URL,
        hide_env_values = true
    )]
    rabbitmq_url: String,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results.
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench destinations --messages {} --concurrency {} --warmup {}{}",
            self.messages,
            self.concurrency,
            self.warmup,
            self.output.flags(),
        )
    }

    fn plan(&self, warmup: u64) -> Plan {
        Plan {
            warmup,
            messages: self.messages,
            connections: self.concurrency,
        }
    }

    /// What the HTTP and RabbitMQ phases are, in [`deliver`]'s terms.
    fn case(&self) -> (Backend, Setting, Mode) {
        (
            Backend::Sqlite,
            Setting::Defaults,
            Mode::Throughput(self.concurrency),
        )
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.messages == 0 || args.concurrency == 0 {
        bail!("--messages and --concurrency must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let http = phase(&args, async |database| {
        let (backend, setting, mode) = args.case();
        deliver::measure(backend, &setting, mode, database, &args.plan(args.warmup)).await
    })
    .await?;
    let http_rate = http.deliveries_per_s;
    let mut rows = vec![Row::delivered(
        "HTTP endpoint",
        "first publish → last verified receipt",
        &http,
    )];
    println!("{}", rows[0].cells(http_rate));
    let rabbit = phase(&args, async |database| rabbitmq(database, &args).await).await?;
    rows.push(Row::delivered(
        "`rabbitMq`",
        "first publish → last consumed",
        &rabbit,
    ));
    println!("{}", rows[1].cells(http_rate));
    let (live, settled) = phase(&args, async |database| polling(database, &args).await).await?;
    let mut polled = Row::delivered(
        "`pollingEndpoint`",
        "first publish → last read, polling while publishing",
        &live,
    );
    // A polled message's signature is over the payload as hookd serialized it; not checked.
    polled.checks[1] = "–".to_owned();
    rows.push(polled);
    rows.push(settled.row(live.delivered));
    for row in &rows[2..] {
        println!("{}", row.cells(http_rate));
    }
    let body = report::table_section(
        &method(&args),
        &args.command(),
        &machine,
        &header(),
        rows.iter().map(|row| row.cells(http_rate)),
    );
    args.output.write(SECTION, &body)?;
    if [&http, &rabbit, &live].iter().any(|run| run.flagged())
        || settled.missing(live.delivered) > 0
    {
        eprintln!("FLAGGED: messages missing, bad signatures or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `measure` on a fresh SQLite database, once the machine is quiet.
async fn phase<T>(
    args: &Args,
    measure: impl AsyncFnOnce(&Database) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    machine::settle(args.output.quiet_below).await?;
    // The server URL is PostgreSQL's; a SQLite database is a file of its own.
    Database::with_fresh(Backend::Sqlite, DEFAULT_POSTGRES_URL, measure).await
}

/// hookd on `database` at its defaults, with an application; its client keeps `plan`'s
/// connections.
async fn start(database: &Database, plan: &Plan) -> anyhow::Result<(Hookd, Api, String)> {
    let (hookd, api) = deliver::start_hookd(database, &Setting::Defaults, plan).await?;
    let app = api.create_app("bench").await?;
    Ok((hookd, api, app))
}

/// The RabbitMQ phase: a queue for the run, deleted after whatever came of it.
async fn rabbitmq(database: &Database, args: &Args) -> anyhow::Result<Run> {
    let queue = Queue::declare(&args.rabbitmq_url).await?;
    let run = async {
        let plan = args.plan(args.warmup);
        let (hookd, api, app) = start(database, &plan).await?;
        let config = json!({
            "uri": args.rabbitmq_url,
            "routingKey": queue.name,
            "mandatory": true,
        });
        let destination = api.create_destination(&app, "rabbitMq", config).await?;
        let secret = api.destination_secret(&app, &destination).await?;
        let consumer = queue.consume(receiver::verifier(&[secret])?).await?;
        deliver::publish_to(hookd, (&api, &app), &consumer, args.case(), &plan).await
    }
    .await;
    queue.delete().await;
    run
}

/// A queue made for one run on the broker, which the default exchange routes its name to.
struct Queue {
    name: String,
    channel: lapin::Channel,
    _connection: lapin::Connection,
}

impl Queue {
    async fn declare(url: &str) -> anyhow::Result<Self> {
        let connection = lapin::Connection::connect(url, Default::default())
            .await
            .with_context(|| format!("cannot reach RabbitMQ at {url}"))?;
        let channel = connection.create_channel().await?;
        let name = format!("hookd-bench-{}", random_hex());
        channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .with_context(|| format!("cannot declare the queue {name}"))?;
        Ok(Self {
            name,
            channel,
            _connection: connection,
        })
    }

    /// Starts consuming: each message is verified with `verifier` and stamped as it arrives.
    async fn consume(&self, verifier: Verifier) -> anyhow::Result<Consumer> {
        // Unacknowledged: the broker sends as fast as it can, and nothing is redelivered.
        let options = BasicConsumeOptions {
            no_ack: true,
            ..BasicConsumeOptions::default()
        };
        let consumer = self
            .channel
            .basic_consume(
                self.name.as_str().into(),
                "hookd-bench".into(),
                options,
                FieldTable::default(),
            )
            .await
            .with_context(|| format!("cannot consume from {}", self.name))?;
        let receipts = Arc::new(Mutex::new(Receipts::default()));
        let (verifier, shared) = (Arc::new(verifier), receipts.clone());
        consumer.set_delegate(move |delivery: DeliveryResult| {
            if let Ok(Some(delivery)) = delivery {
                record(&verifier, &shared, &delivery);
            }
            std::future::ready(())
        });
        Ok(Consumer {
            receipts,
            _consumer: consumer,
        })
    }

    /// Deletes the queue; a failure is reported, not returned (this runs on error paths).
    async fn delete(self) {
        let deleted = self
            .channel
            .queue_delete(self.name.as_str().into(), QueueDeleteOptions::default())
            .await;
        if let Err(error) = deleted {
            eprintln!(
                "warning: cannot delete the RabbitMQ queue {}: {error}",
                self.name
            );
        }
    }
}

/// Verifies one message from its headers and records its arrival now.
fn record(verifier: &Verifier, receipts: &Mutex<Receipts>, delivery: &Delivery) {
    let at = unix_nanos();
    let headers: Vec<(String, String)> = delivery
        .properties
        .headers()
        .iter()
        .flat_map(|table| table.inner().iter())
        .filter_map(|(name, value)| match value {
            AMQPValue::LongString(text) => Some((name.to_string(), text.to_string())),
            _ => None,
        })
        .collect();
    let verified = verifier
        .verify(&delivery.data, headers.iter().cloned())
        .is_ok();
    let id = headers
        .into_iter()
        .find_map(|(name, value)| (name == "webhook-id").then_some(value));
    let key = id.filter(|_| verified);
    receipts.lock().expect("the receipts").record(key, at);
}

/// What the RabbitMQ consumer has seen; consuming stops when dropped.
struct Consumer {
    receipts: Arc<Mutex<Receipts>>,
    _consumer: lapin::Consumer,
}

impl Arrivals for Consumer {
    async fn count(&self) -> anyhow::Result<u64> {
        Ok(self.receipts.lock().expect("the receipts").first_seen.len() as u64)
    }

    async fn results(&self) -> anyhow::Result<Receipts> {
        Ok(std::mem::take(
            &mut *self.receipts.lock().expect("the receipts"),
        ))
    }
}

/// The polling phase: the consumer reading while the messages are published (as a [`Run`]:
/// its latency is the publish-to-read lag), then the pass over settled messages.
async fn polling(database: &Database, args: &Args) -> anyhow::Result<(Run, Settled)> {
    // No warm-up publishes: nothing is delivered, and the first pass warms the second.
    let plan = args.plan(0);
    let (hookd, api, app) = start(database, &plan).await?;
    let destination = api
        .create_destination(&app, "pollingEndpoint", json!({}))
        .await?;
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let hookd_cpu = hookd.cpu_time()?;
    let started = Instant::now();
    let reader = tokio::spawn(read_live(
        api.clone(),
        (app.clone(), destination.clone()),
        expected.clone(),
    ));
    let (publishes, sent) = api
        .publish_logged(&app, args.concurrency, 0..args.messages)
        .await?;
    expected.store(sent.len() as u64, Ordering::Relaxed);
    let receipts = reader.await.context("the polling consumer panicked")??;
    let cpu = deliver::CpuUsed {
        elapsed: started.elapsed(),
        hookd: hookd.cpu_time()?.saturating_sub(hookd_cpu),
        ..Default::default()
    };
    let live = deliver::tally(
        args.case(),
        publishes,
        &sent,
        &receipts,
        hookd.peak_rss_kib()?,
        &cpu,
    );
    let settled = read_settled(&hookd, &api, (&app, &destination)).await?;
    hookd.stop();
    Ok((live, settled))
}

/// Polls destination `destination` of `app` from its creation, following the iterator,
/// until it has read `expected` messages (set once publishing ends) or has read nothing new
/// for [`POLL_PATIENCE`]; each message is stamped when first read.
async fn read_live(
    api: Api,
    (app, destination): (String, String),
    expected: Arc<AtomicU64>,
) -> anyhow::Result<Receipts> {
    let mut receipts = Receipts::default();
    let (mut iterator, mut progressed) = (None, Instant::now());
    while (receipts.first_seen.len() as u64) < expected.load(Ordering::Relaxed) {
        let page = api
            .poll(&app, &destination, iterator.as_deref(), POLL_LIMIT)
            .await?;
        let at = unix_nanos();
        if !page.data.is_empty() {
            progressed = Instant::now();
        }
        for message in page.data {
            receipts.record(Some(message.id), at);
        }
        iterator = Some(page.iterator);
        if page.done {
            if progressed.elapsed() > POLL_PATIENCE {
                eprintln!(
                    "warning: the polling consumer read {} messages; giving up waiting",
                    receipts.first_seen.len()
                );
                break;
            }
            tokio::time::sleep(POLL_PAUSE).await;
        }
    }
    Ok(receipts)
}

/// The second pass: every message read again from the destination's creation, all settled.
struct Settled {
    read: u64,
    polls: u64,
    elapsed: Duration,
    hookd_cores: f64,
}

impl Settled {
    /// Messages of the `expected` (those the live pass read) this one did not read.
    fn missing(&self, expected: u64) -> u64 {
        expected.saturating_sub(self.read)
    }

    fn row(&self, expected: u64) -> Row {
        Row {
            destination: "`pollingEndpoint`",
            measured: format!(
                "reading them again, settled: {} polls of up to {POLL_LIMIT}",
                report::thousands(self.polls)
            ),
            publish_rate: None,
            per_s: self.read as f64 / self.elapsed.as_secs_f64().max(1e-9),
            latency: None,
            arrived: self.read,
            checks: [
                report::flagged(self.missing(expected)),
                "–".to_owned(),
                "–".to_owned(),
                "–".to_owned(),
            ],
            hookd_cores: self.hookd_cores,
        }
    }
}

/// Reads every message of the polling destination from its creation, one poll after another.
async fn read_settled(
    hookd: &Hookd,
    api: &Api,
    (app, destination): (&str, &str),
) -> anyhow::Result<Settled> {
    let hookd_cpu = hookd.cpu_time()?;
    let started = Instant::now();
    let (mut iterator, mut read, mut polls) = (None, 0, 0);
    loop {
        let page = api
            .poll(app, destination, iterator.as_deref(), POLL_LIMIT)
            .await?;
        polls += 1;
        read += page.data.len() as u64;
        iterator = Some(page.iterator);
        if page.done {
            break;
        }
    }
    let elapsed = started.elapsed();
    let hookd_cores =
        hookd.cpu_time()?.saturating_sub(hookd_cpu).as_secs_f64() / elapsed.as_secs_f64();
    Ok(Settled {
        read,
        polls,
        elapsed,
        hookd_cores,
    })
}

/// One line of the table.
struct Row {
    destination: &'static str,
    measured: String,
    publish_rate: Option<f64>,
    per_s: f64,
    /// p50 and p99 from publish to arrival.
    latency: Option<(Duration, Duration)>,
    arrived: u64,
    /// Missing, bad signatures, duplicates, publish errors.
    checks: [String; 4],
    hookd_cores: f64,
}

impl Row {
    /// The row of a phase measured as [`deliver`] measures.
    fn delivered(destination: &'static str, measured: &str, run: &Run) -> Self {
        Self {
            destination,
            measured: measured.to_owned(),
            publish_rate: Some(run.publishes.throughput()),
            per_s: run.deliveries_per_s,
            latency: Some((run.latency(0.50), run.latency(0.99))),
            arrived: run.delivered,
            checks: [
                report::flagged(run.missing),
                report::flagged(run.bad_signatures),
                report::thousands(run.duplicates),
                report::flagged(run.publishes.error_count()),
            ],
            hookd_cores: run.hookd_cores,
        }
    }

    /// The table's cells, the rate also as a share of `http_rate`.
    fn cells(&self, http_rate: f64) -> String {
        let rate = |per_s: f64| report::thousands(per_s.round() as u64);
        let (p50, p99) = match self.latency {
            Some((p50, p99)) => (report::millis(p50), report::millis(p99)),
            None => ("–".to_owned(), "–".to_owned()),
        };
        report::row(&[
            self.destination.to_owned(),
            self.measured.clone(),
            self.publish_rate
                .map_or("–".to_owned(), |r| format!("{}/s", rate(r))),
            rate(self.per_s),
            report::percent(self.per_s / http_rate.max(1e-9)),
            p50,
            p99,
            report::thousands(self.arrived),
            self.checks.join(" / "),
            format!("{:.2} cores", self.hookd_cores),
        ])
    }
}

fn header() -> String {
    report::header(&[
        "destination",
        "measured",
        "publish rate",
        "messages/s",
        "of the HTTP rate",
        "p50",
        "p99",
        "arrived",
        "missing / bad signatures / duplicates / publish errors",
        "hookd CPU",
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "The same publishes (`POST /api/v1/app/{{app}}/msg`, ~300-byte payloads, {} in flight, \
         {} messages) to one application with one endpoint or destination, at hookd's defaults \
         on SQLite, each phase on a fresh hookd and database; \"of the HTTP rate\" is a rate as \
         a share of the HTTP endpoint's in the same run. p50 and p99 run from a publish to its \
         arrival.\n\n\
         - **HTTP endpoint**: `deliver`'s throughput mode, after {} warm-up messages: the \
         verifying receiver process; deliveries/s from the first publish to the last receipt.\n\
         - **`rabbitMq`**: a destination publishing to a queue made for the run (deleted after) \
         on the local RabbitMQ, under publisher confirms, after {} warm-up messages; a consumer \
         in the harness (unacknowledged mode) verifies each message's signature from its \
         headers; messages/s from the first publish to the last message consumed.\n\
         - **`pollingEndpoint`**: a consumer polls `GET …/poller/{{id}}` while the messages are \
         published, following the iterator ({POLL_LIMIT} a poll, {} ms apart once it has read \
         everything settled). A poll serves a message once it is 5 seconds old, so its rate \
         and lag show that wait, not hookd's speed. Then it reads them all again from the \
         destination's creation, one poll after another: the read rate over settled \
         messages.\n",
        args.concurrency,
        report::thousands(args.messages),
        report::thousands(args.warmup),
        report::thousands(args.warmup),
        POLL_PAUSE.as_millis(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Destinations(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
        let settled = Settled {
            read: 20_000,
            polls: 80,
            elapsed: Duration::from_millis(103),
            hookd_cores: 0.68,
        };
        report::page::assert_shows_shape(SECTION, &settled.row(20_000).cells(9_204.0));
    }
}
