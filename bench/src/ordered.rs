//! `hookd-bench ordered`: deliveries/s with ordering keys, beside the unordered rate.
//!
//! One application whose endpoint is aimed at a verifying receiver process; messages published
//! closed loop, `--concurrency` in flight. Each run gets a fresh hookd and database: first
//! without ordering keys, then with each of `--keys` keys (message `i` gets key `i mod K`).
//! A key moves one message at a time: its attempt, the record that settles it, and the claim
//! that starts the next, so one key's rate is one over that round, shown in its own column.
//! Last, "beside": one endpoint taking unordered messages while another takes as many more,
//! published at the same time: first unordered too, then ordered (`--beside-keys` keys). On a
//! machine the two streams share, the first endpoint's rate beside ordered traffic against its
//! rate beside unordered traffic shows what ordering costs the rest.
//!
//! Each backend runs at hookd's defaults first, then with the `--tuned` flags.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use serde_json::Value;

use crate::api::{Api, SendLog};
use crate::deliver::drain;
use crate::hookd::{Backend, Backends, Database, Hookd, PostgresServer, Setting, Tuning};
use crate::load::{self, Outcome};
use crate::machine::{self, Machine};
use crate::publish::{Bodies, message};
use crate::receiver::{Receipts, ReceiverProcess};
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "ordered";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) to run hookd on; each run gets a fresh one.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backends,
    /// Ordering keys per run; one run per value (after the run without keys).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 10_000])]
    keys: Vec<u64>,
    /// Messages per run, except with one key.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Messages of the run with one key (it moves one round trip at a time).
    #[arg(long, default_value_t = 1_000)]
    one_key_messages: u64,
    /// Keys of the ordered traffic in the "beside" run.
    #[arg(long, default_value_t = 100)]
    beside_keys: u64,
    /// Publishes in flight at all times (split between the two in the "beside" run).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[command(flatten)]
    tuning: Tuning,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench ordered --backend {} --keys {} --messages {} \
             --one-key-messages {} --beside-keys {} --concurrency {} {}{}",
            self.backend.flag(),
            self.keys
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.messages,
            self.one_key_messages,
            self.beside_keys,
            self.concurrency,
            self.tuning.flag(),
            self.output.flags()
        )
    }

    fn messages_with(&self, keys: Option<u64>) -> u64 {
        match keys {
            Some(1) => self.one_key_messages,
            _ => self.messages,
        }
    }
}

/// What a run publishes: to one endpoint, without keys or with `K` keys; or to two at once,
/// the first without keys and the second without or with `K` keys.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    Keys(Option<u64>),
    Beside(Option<u64>),
}

/// One run's measurements.
struct Run {
    backend: Backend,
    setting: Setting,
    case: Case,
    /// The endpoint measured (in "beside", the unordered one).
    measured: Stream,
    /// In "beside", the ordered endpoint.
    ordered: Option<Stream>,
}

/// One endpoint's traffic in a run.
struct Stream {
    publishes: Outcome,
    delivered: u64,
    missing: u64,
    deliveries_per_s: f64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.keys.contains(&0) || args.messages == 0 || args.one_key_messages == 0 {
        bail!("--keys values, --messages and --one-key-messages must be at least 1");
    }
    if args.concurrency < 2 || args.beside_keys == 0 {
        bail!("--concurrency must be at least 2 and --beside-keys at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    println!("{}", header());
    let cases: Vec<Case> = std::iter::once(Case::Keys(None))
        .chain(args.keys.iter().map(|&k| Case::Keys(Some(k))))
        .chain([Case::Beside(None), Case::Beside(Some(args.beside_keys))])
        .collect();
    let mut runs = Vec::new();
    for backend in args.backend.list() {
        for setting in args.tuning.settings() {
            for &case in &cases {
                machine::settle(args.output.quiet_below).await?;
                let run = Database::with_fresh(backend, &args.postgres.url, async |database| {
                    measure(backend, &setting, case, database, &args).await
                })
                .await?;
                println!("{}", row(&run));
                runs.push(run);
            }
        }
    }
    args.output
        .write(SECTION, &section(&args, &machine, &runs))?;
    let flagged = runs.iter().any(|r| {
        std::iter::once(&r.measured)
            .chain(&r.ordered)
            .any(|s| s.missing + s.publishes.error_count() > 0)
    });
    if flagged {
        eprintln!("FLAGGED: messages missing or failed publishes");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Message `i` of a run with `keys` keys: key `i mod keys`, or none.
fn bodies(keys: Option<u64>, event_type: &str) -> Bodies {
    // Request `i` gets body `i mod count`: a multiple of the key count keeps `i mod keys`.
    let count = keys.map_or(Bodies::COUNT, |k| k * Bodies::COUNT.div_ceil(k));
    let event_type = event_type.to_owned();
    Bodies::with_count(count, move |i| {
        let mut body = message(i);
        body["eventType"] = Value::from(event_type.as_str());
        if let Some(k) = keys {
            body["orderingKey"] = Value::from(format!("key-{}", i % k));
        }
        body.to_string()
    })
}

async fn measure(
    backend: Backend,
    setting: &Setting,
    case: Case,
    database: &Database,
    args: &Args,
) -> anyhow::Result<Run> {
    let url = database.url().to_owned();
    let options = setting.flags().to_vec();
    let hookd = tokio::task::spawn_blocking(move || Hookd::start(&url, &options)).await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("ordered").await?;
    let endpoints = api.endpoints_with_secrets(&app, 2).await?;
    let secrets: Vec<String> = endpoints.iter().map(|(_, s)| s.clone()).collect();
    let receiver = ReceiverProcess::start_with(&secrets, true)?;
    for ((id, _), (name, event_type)) in endpoints.iter().zip(STREAMS) {
        api.set_endpoint_url(&app, id, &receiver.url(name)).await?;
        api.filter_endpoint(&app, id, event_type).await?;
    }
    let (plain_keys, other, plain_share) = match case {
        Case::Keys(keys) => (keys, None, args.concurrency),
        Case::Beside(keys) => (None, Some(keys), args.concurrency / 2),
    };
    let plain_messages = args.messages_with(plain_keys);
    let plain_log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let plain = load::run(
        plain_share,
        0..plain_messages,
        api.publisher_of(
            &app,
            Some(plain_log.clone()),
            bodies(plain_keys, STREAMS[0].1),
        )?,
    );
    let ordered_log: SendLog = Arc::new(Mutex::new(Vec::new()));
    let ordered = async {
        match other {
            None => None,
            Some(keys) => {
                let publisher =
                    api.publisher_of(&app, Some(ordered_log.clone()), bodies(keys, STREAMS[1].1));
                let outcome = match publisher {
                    Ok(publisher) => {
                        load::run(args.concurrency - plain_share, 0..args.messages, publisher).await
                    }
                    Err(error) => return Some(Err(error)),
                };
                Some(Ok(outcome))
            }
        }
    };
    let (plain, ordered) = tokio::join!(plain, ordered);
    let ordered = ordered.transpose()?;
    let sent = |log: &SendLog| std::mem::take(&mut *log.lock().expect("the send log"));
    let (plain_sent, ordered_sent) = (sent(&plain_log), sent(&ordered_log));
    drain(&receiver, (plain_sent.len() + ordered_sent.len()) as u64).await?;
    let receipts = receiver.results().await?;
    hookd.stop();
    Ok(Run {
        backend,
        setting: setting.clone(),
        case,
        measured: stream(plain, &plain_sent, &receipts, STREAMS[0].0),
        ordered: ordered.map(|outcome| stream(outcome, &ordered_sent, &receipts, STREAMS[1].0)),
    })
}

/// Fewest messages per key for the per-key columns to be shown.
const MIN_PER_KEY: u64 = 10;

/// The two endpoints: the receiver's path for each, and the event type it takes.
const STREAMS: [(&str, &str); 2] = [
    ("plain", "invoice.paid"),
    ("ordered", "consignment.updated"),
];

/// One endpoint's deliveries/s, from its first publish sent to its last receipt.
fn stream(publishes: Outcome, sent: &[(String, u64)], receipts: &Receipts, path: &str) -> Stream {
    let (mut delivered, mut last) = (0, 0);
    for (id, _) in sent {
        if let Some(&at) = receipts.first_seen.get(&format!("{path}/{id}")) {
            delivered += 1;
            last = u64::max(last, at);
        }
    }
    let first = sent.iter().map(|(_, at)| *at).min().unwrap_or(0);
    let span = Duration::from_nanos(last.saturating_sub(first));
    Stream {
        publishes,
        delivered,
        missing: sent.len() as u64 - delivered,
        deliveries_per_s: delivered as f64 / span.as_secs_f64().max(1e-9),
    }
}

fn header() -> String {
    report::header(&[
        "backend",
        "hookd",
        "messages",
        "deliveries/s",
        "per key",
        "one key's round",
        "delivered",
        "missing",
        "publish errors",
    ])
}

fn row(run: &Run) -> String {
    let s = &run.measured;
    let (label, per_key) = match run.case {
        Case::Keys(None) => ("no ordering key".to_owned(), None),
        // A key's round means something only for keys with a run of messages to move.
        Case::Keys(Some(k)) => (
            format!("{} key(s)", report::thousands(k)),
            (s.delivered >= MIN_PER_KEY * k).then(|| s.deliveries_per_s / k as f64),
        ),
        Case::Beside(keys) => {
            let beside = run
                .ordered
                .as_ref()
                .map_or(0, |o| o.deliveries_per_s.round() as u64);
            let what = match keys {
                None => "unordered".to_owned(),
                Some(k) => format!("ordered over {} keys", report::thousands(k)),
            };
            (
                format!(
                    "no key, beside {}/s {what} to another endpoint",
                    report::thousands(beside)
                ),
                None,
            )
        }
    };
    report::row(&[
        run.backend.name().to_owned(),
        run.setting.name().to_owned(),
        label,
        report::thousands(s.deliveries_per_s.round() as u64),
        per_key.map_or("–".to_owned(), |r| format!("{r:.1}/s")),
        per_key.filter(|r| *r > 0.0).map_or("–".to_owned(), |r| {
            report::millis(Duration::from_secs_f64(1.0 / r))
        }),
        report::thousands(s.delivered),
        report::flagged(s.missing + run.ordered.as_ref().map_or(0, |o| o.missing)),
        report::flagged(s.publishes.error_count()),
    ])
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "Messages published closed loop ({} in flight) to one application with one endpoint: \
         without ordering keys, then with {} keys (message `i` gets key `i mod K`; {} \
         messages, {} with one key). A key moves one message at a time (its attempt, the \
         record that settles it, the claim of the next), so \"one key's round\" is how long \
         one message of a key takes (shown where each key has at least {MIN_PER_KEY} \
         messages). The last two runs of each setting publish unordered messages to one \
         endpoint while as many more go to another endpoint, first unordered, then ordered \
         ({} keys); the first endpoint's rate in the two shows what ordered traffic costs the \
         rest (the two streams share the machine in both).\n",
        args.concurrency,
        report::listed(args.keys.iter().copied(), "and"),
        report::thousands(args.messages),
        report::thousands(args.one_key_messages),
        report::thousands(args.beside_keys),
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
        let crate::Command::Ordered(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args), &header()]);
    }
}
