//! `hookd-bench search`: how fast the delivery log answers its searches on a million messages.
//!
//! The support person's question is "did you send it?", asked of an application with a long
//! history. This benchmark writes that history, then times the questions the portal asks
//! (`GET /api/v1/app/{app}/msg` with each filter, a message by id or `eventId`, an endpoint's
//! day of statistics and its failed messages) against the release binary over HTTP.
//!
//! The history is written through hookd's own store (`hookd_store::open`), exactly the rows the
//! API and the engine write, but without a network round trip per row, so a million messages
//! take a minute or two rather than an hour: one application, messages spread evenly over 30
//! days, ten event types (one rare), an `eventId` on each; an endpoint subscribed to everything
//! (97 % delivered, 2 % failed for good, 1 % waiting for a retry hours away) and one subscribed
//! to `invoice.paid` only. Nothing is due while measuring, so hookd's engine stays idle.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, SealedKeys, TriggerType,
};
use hookd_core::{AppId, AttemptId, EndpointId, MessageId, Timestamp};
use hookd_store::{NewMessage, Store};
use reqwest::header::AUTHORIZATION;

use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer};
use crate::machine::{self, Machine};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "search";

/// The history's length.
const SPAN: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// The common event types; `refund.created` is the rare one (one message in a thousand).
const EVENT_TYPES: [&str; 9] = [
    "order.created",
    "order.paid",
    "order.shipped",
    "order.delivered",
    "invoice.paid",
    "invoice.created",
    "customer.created",
    "customer.updated",
    "subscription.renewed",
];
const RARE: &str = "refund.created";
/// Writers in flight while seeding.
const SEEDERS: u64 = 128;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run on; each gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Messages in the application's history.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Times each query is asked (after one unmeasured ask).
    #[arg(long, default_value_t = 30)]
    repeat: usize,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench search --backend {} --messages {} --repeat {}{}",
            self.backend.flag(),
            self.messages,
            self.repeat,
            self.output.flags()
        )
    }
}

/// The history written: what the queries refer to.
struct History {
    app: AppId,
    endpoint: EndpointId,
    /// The lowest id of the history's middle (a page iterator), the message written there,
    /// and the end of the history.
    middle: MessageId,
    middle_message: MessageId,
    end: Timestamp,
    seconds: f64,
}

/// One query's timings.
struct Timed {
    name: &'static str,
    rows: usize,
    median: Duration,
    p95: Duration,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.messages < 1_000 || args.repeat == 0 {
        bail!("--messages must be at least 1000 and --repeat at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    let mut results = Vec::new();
    for backend in args.backend.list() {
        machine::settle(args.output.quiet_below).await?;
        let database = Database::create(backend, &args.postgres.url).await?;
        let result = measure(&database, &args).await;
        database.remove().await;
        let (history, timed) = result?;
        results.push((backend, history.seconds, timed));
    }
    args.output
        .write(SECTION, &section(&args, &machine, &results))?;
    Ok(ExitCode::SUCCESS)
}

async fn measure(database: &Database, args: &Args) -> anyhow::Result<(History, Vec<Timed>)> {
    println!(
        "writing {} messages of history…",
        report::thousands(args.messages)
    );
    let history = seed(database.url(), args.messages).await?;
    println!("  written in {:.0} s", history.seconds);
    database.analyze().await?;
    let url = database.url().to_owned();
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &[])).await??;
    let client = reqwest::Client::new();
    let base = format!("{}/api/v1/app/{}", hookd.base_url, history.app);
    let auth = format!("Bearer {}", hookd.admin_token);
    let mut timed = Vec::new();
    println!("{}", table_header());
    for (name, path) in queries(&history) {
        let url = format!("{base}{path}");
        let result = time_query(&client, &url, &auth, args.repeat).await;
        let (rows, mut times) = result.with_context(|| format!("{name}: GET {url}"))?;
        times.sort();
        let one = Timed {
            name,
            rows,
            median: times[times.len() / 2],
            p95: times[(times.len() * 95).div_ceil(100) - 1],
        };
        println!("{}", table_row(&one));
        timed.push(one);
    }
    hookd.stop();
    Ok((history, timed))
}

/// The portal's questions: a name, and the path under `/api/v1/app/{app}`.
fn queries(history: &History) -> Vec<(&'static str, String)> {
    let (ep, middle) = (&history.endpoint, &history.middle);
    let day = |days_ago: u64| {
        history
            .end
            .minus(Duration::from_secs(days_ago * 24 * 60 * 60))
            .to_rfc3339()
    };
    vec![
        ("newest messages", "/msg?limit=50".into()),
        (
            "a page deep in the history",
            format!("/msg?limit=50&iterator={middle}"),
        ),
        (
            "by event type (common)",
            "/msg?limit=50&event_types=order.shipped".into(),
        ),
        (
            "by event type (1 in 1,000)",
            format!("/msg?limit=50&event_types={RARE}"),
        ),
        ("delivered", "/msg?limit=50&status=0".into()),
        ("pending", "/msg?limit=50&status=1".into()),
        ("failed", "/msg?limit=50&status=2".into()),
        (
            "one day, 15 days ago",
            format!("/msg?limit=50&after={}&before={}", day(15), day(14)),
        ),
        (
            "failed, common type, one day",
            format!(
                "/msg?limit=50&status=2&event_types=order.paid&after={}&before={}",
                day(15),
                day(14)
            ),
        ),
        (
            "failed, rare type",
            format!("/msg?limit=50&status=2&event_types={RARE}"),
        ),
        ("message by id", format!("/msg/{}", history.middle_message)),
        ("message by eventId", "/msg/evt-500".into()),
        ("endpoint stats, last day", format!("/endpoint/{ep}/stats")),
        (
            "endpoint's failed messages",
            format!("/endpoint/{ep}/msg?limit=50&status=2"),
        ),
        (
            "endpoint's latest attempts",
            format!("/attempt/endpoint/{ep}?limit=50"),
        ),
    ]
}

/// Asks `url` once unmeasured, then `repeat` times; the rows of the answer and each time.
async fn time_query(
    client: &reqwest::Client,
    url: &str,
    auth: &str,
    repeat: usize,
) -> anyhow::Result<(usize, Vec<Duration>)> {
    let mut rows = 0;
    let mut times = Vec::with_capacity(repeat);
    for round in 0..=repeat {
        let started = Instant::now();
        let response = client.get(url).header(AUTHORIZATION, auth).send().await?;
        let status = response.status();
        let body: serde_json::Value = response.json().await?;
        let elapsed = started.elapsed();
        if !status.is_success() {
            bail!("answered {status}: {body}");
        }
        rows = body["data"].as_array().map_or(1, Vec::len);
        if round > 0 {
            times.push(elapsed);
        }
    }
    Ok((rows, times))
}

/// A well-mixed number for `i`, to pick event types and outcomes without a random generator.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn seed(url: &str, messages: u64) -> anyhow::Result<History> {
    let started = Instant::now();
    let store = hookd_store::open(url).await?;
    let end = now();
    let start = end.minus(SPAN);
    let app = Application {
        id: AppId::new(start),
        uid: Some("acme".into()),
        name: "Acme".into(),
        metadata: Default::default(),
        throttle_rate: None,
        envelope: false,
        created_at: start,
        updated_at: start,
    };
    store.create_app(&app).await?;
    let everything = endpoint(&app, start, None, "all");
    let invoices = endpoint(&app, start, Some(vec!["invoice.paid".into()]), "invoices");
    store.create_endpoint(&everything).await?;
    store.create_endpoint(&invoices).await?;
    let step = SPAN.as_millis() as u64 / messages;
    let shared = Arc::new((store, app.id.clone(), everything.clone(), invoices));
    let mut writers = tokio::task::JoinSet::new();
    for first in 0..SEEDERS {
        let shared = shared.clone();
        writers.spawn(async move {
            let (store, app, everything, invoices) = &*shared;
            let (mut i, mut middle) = (first, None);
            while i < messages {
                let at = start.plus(Duration::from_millis(i * step));
                let id = write_one(store.as_ref(), app, everything, invoices, i, at).await?;
                if i == messages / 2 {
                    middle = Some(id);
                }
                i += SEEDERS;
            }
            anyhow::Ok(middle)
        });
    }
    let mut middle_message = None;
    while let Some(done) = writers.join_next().await {
        middle_message = middle_message.or(done??);
    }
    let middle_at = start.plus(Duration::from_millis(messages / 2 * step));
    Ok(History {
        app: app.id,
        endpoint: everything.id,
        middle: MessageId::lowest_at(middle_at),
        middle_message: middle_message.context("the middle message was written")?,
        end,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn endpoint(
    app: &Application,
    at: Timestamp,
    event_types: Option<Vec<String>>,
    path: &str,
) -> Endpoint {
    Endpoint {
        id: EndpointId::new(at),
        app_id: app.id.clone(),
        uid: Some(path.into()),
        // Never called: nothing is due while the benchmark runs.
        url: format!("http://127.0.0.1:9/{path}"),
        description: format!("{path} (hookd-bench)"),
        event_types,
        channels: None,
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: None,
        timeout_secs: None,
        max_concurrency: None,
        ordering: Default::default(),
        metadata: Default::default(),
        headers: Default::default(),
        // Written straight to the store, so in the clear as schema v1 kept secrets: hookd seals
        // it under its master key when it starts.
        keys: SealedKeys::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()),
        created_at: at,
        updated_at: at,
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
    }
}

/// Writes message `i` at `at`, and what became of its deliveries; answers its id.
async fn write_one(
    store: &dyn Store,
    app: &AppId,
    everything: &Endpoint,
    invoices: &Endpoint,
    i: u64,
    at: Timestamp,
) -> anyhow::Result<MessageId> {
    let mixed = mix(i);
    let event_type = if mixed.is_multiple_of(1_000) {
        RARE
    } else {
        EVENT_TYPES[(mixed >> 10) as usize % EVENT_TYPES.len()]
    };
    let message = Message {
        id: MessageId::new(at),
        app_id: app.clone(),
        event_type: event_type.into(),
        event_id: Some(format!("evt-{i}")),
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(
            format!(
                r#"{{"id":{i},"type":"{event_type}","customer":"cus_{:08x}","amount":{},"currency":"EUR","items":[{{"sku":"SKU-{}","qty":1}}]}}"#,
                mixed as u32,
                mixed % 100_000,
                mixed % 977
            )
            .into_bytes(),
        ),
        created_at: at,
    };
    store.publish(NewMessage::new(message.clone())).await?;
    let outcome = match (mixed >> 40) % 100 {
        0..=1 => DeliveryStatus::Fail,
        2 => DeliveryStatus::Pending,
        _ => DeliveryStatus::Success,
    };
    finish(store, &message, everything, outcome).await?;
    if event_type == "invoice.paid" {
        finish(store, &message, invoices, DeliveryStatus::Success).await?;
    }
    Ok(message.id)
}

/// One attempt a second after the message, leaving its delivery `outcome`; a pending delivery
/// waits for a retry five hours after the end of the history, so nothing is due meanwhile.
async fn finish(
    store: &dyn Store,
    message: &Message,
    endpoint: &Endpoint,
    outcome: DeliveryStatus,
) -> anyhow::Result<()> {
    let at = message.created_at.plus(Duration::from_secs(1));
    let ok = outcome == DeliveryStatus::Success;
    let attempt = Attempt {
        id: AttemptId::new(at),
        message_id: message.id.clone(),
        endpoint_id: endpoint.id.clone(),
        url: endpoint.url.clone(),
        response_status_code: if ok { 200 } else { 503 },
        response: String::new(),
        response_head: String::new(),
        response_duration_ms: 40,
        status: if ok {
            DeliveryStatus::Success
        } else {
            DeliveryStatus::Fail
        },
        trigger_type: TriggerType::Scheduled,
        created_at: at,
    };
    let retry = now().plus(Duration::from_secs(5 * 3600));
    let delivery = Delivery {
        message_id: message.id.clone(),
        endpoint_id: endpoint.id.clone(),
        status: outcome,
        attempt_count: 1,
        next_attempt_at: (outcome == DeliveryStatus::Pending).then_some(retry),
        updated_at: at,
        ordering_key: None,
    };
    store.record_attempt(&attempt, &delivery).await?;
    Ok(())
}

/// Now, as hookd stamps its records (unix milliseconds).
pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis((crate::api::unix_nanos() / 1_000_000) as i64)
}

fn table_header() -> String {
    report::header(&["query", "rows", "median", "p95"])
}

fn table_row(t: &Timed) -> String {
    report::row(&[
        t.name.to_owned(),
        t.rows.to_string(),
        report::millis(t.median),
        report::millis(t.p95),
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## Delivery log search on {} messages\n\n\
         One application with {} messages over 30 days (ten event types, one of them 1 in \
         1,000; an endpoint taking everything: 97 % delivered, 2 % failed, 1 % waiting for a \
         retry; one taking `invoice.paid`), written through hookd's store; on PostgreSQL then \
         `ANALYZE`d, as autovacuum would have over those 30 days (this machine's server runs \
         with autovacuum off, and a planner without statistics sorts whole index ranges); then \
         each query the portal makes is asked {} times over HTTP of the release binary, one at \
         a time. Times are the client's, request to parsed answer.\n",
        report::thousands(args.messages),
        report::thousands(args.messages),
        args.repeat,
    )
}

/// The docs table's header: each query's rows, then each backend's median and p95.
fn docs_header(backends: &[Backend]) -> String {
    let mut cells = vec!["query".to_owned(), "rows".to_owned()];
    for backend in backends {
        cells.push(format!("{} median", backend.name()));
        cells.push(format!("{} p95", backend.name()));
    }
    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
    report::header(&cells)
}

/// The docs table's row for query number `i`: its rows (one figure if every backend found
/// as many), then each backend's times.
fn docs_row(results: &[(Backend, f64, Vec<Timed>)], i: usize) -> String {
    let timed: Vec<&Timed> = results.iter().map(|(_, _, timed)| &timed[i]).collect();
    let mut rows: Vec<String> = timed.iter().map(|t| t.rows.to_string()).collect();
    rows.dedup();
    let mut cells = vec![timed[0].name.to_owned(), rows.join(" / ")];
    for t in timed {
        cells.push(report::millis(t.median));
        cells.push(report::millis(t.p95));
    }
    report::row(&cells)
}

/// How long each backend's history took to write.
fn history_line(results: &[(Backend, f64, Vec<Timed>)]) -> String {
    let written: Vec<String> = results
        .iter()
        .map(|(backend, seconds, _)| format!("{seconds:.0} s on {}", backend.name()))
        .collect();
    format!("History written in {}.", written.join(", "))
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, results: &[(Backend, f64, Vec<Timed>)]) -> String {
    let backends: Vec<Backend> = results.iter().map(|(backend, _, _)| *backend).collect();
    let mut out = format!(
        "{}\n{}\n{}\n\n{}\n",
        method(args),
        report::provenance(&args.command(), machine),
        history_line(results),
        docs_header(&backends),
    );
    let queries = results.iter().map(|(_, _, timed)| timed.len()).min();
    for i in 0..queries.unwrap_or(0) {
        out.push_str(&docs_row(results, i));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Search(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args)]);
        report::page::assert_shows(SECTION, &docs_header(&args.backend.list()));
        let timed = |median: u64, p95: u64| Timed {
            name: "newest messages",
            rows: 50,
            median: Duration::from_micros(median),
            p95: Duration::from_micros(p95),
        };
        let results = [
            (Backend::Sqlite, 107.0, vec![timed(360, 920)]),
            (Backend::Postgres, 835.0, vec![timed(440, 7_850)]),
        ];
        report::page::assert_shows_shape(SECTION, &docs_row(&results, 0));
        report::page::assert_shows_shape(SECTION, &history_line(&results));
    }
}
