//! `hookd-bench ingest`: how many signed provider webhooks an ingest source accepts per
//! second, and how long from the provider's send to the forwarded copy's verified receipt,
//! against publishing through the API in the same run.
//!
//! Two paths, each run on a fresh hookd and SQLite database, to one target: the verifying
//! receiver process (`hookd-bench receive`), which checks every Standard Webhooks signature
//! and stamps the first receipt of each message.
//!
//! - **publish**: [`crate::deliver`]'s runs, `POST /api/v1/app/{app}/msg` to an application
//!   with one endpoint.
//! - **ingest**: a `stripe` source with one forwarding target; each request is a distinct
//!   Stripe event (its own `evt_…` id, so none is a duplicate; the same ~300-byte invoice as
//!   the publishes'), signed with `Stripe-Signature` when it is sent and POSTed to the source's
//!   ingest URL. hookd checks the signature, commits the request, answers 202 with the
//!   message's id and forwards it, signed with the target's secret.
//!
//! Each path runs a throughput mode (a closed loop of `--concurrency` requests) and a latency
//! mode (an open loop at an eighth of the ceiling loop's rate, measured first in the same run
//! unless given), at hookd's defaults, then with the `--tuned` flags. Latency runs from a
//! request's send (or, open loop, from when it was due) to its verified receipt. A request
//! refused, a message missing or a bad signature flags the run.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::json;
use webhook_signature::Secret;

use crate::ceiling;
use crate::deliver::{self, Mode, Plan, Run};
use crate::hookd::{Backend, DEFAULT_POSTGRES_URL, Database, Setting, Tuning};
use crate::machine::{self, Machine};
use crate::publish::{Bodies, message};
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "ingest";

/// The source's Stripe endpoint secret (the harness signs as Stripe would).
const STRIPE_SECRET: &str = "whsec_hookd_bench_stripe_endpoint_secret";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Requests in flight in the throughput mode; the latency mode's most connections.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Throughput mode: requests sent in the measured phase.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Requests sent (and forwarded) first in each run, not measured.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Latency mode: seconds of sending at an eighth of the ceiling loop's rate.
    #[arg(long, default_value_t = 20)]
    latency_seconds: u64,
    #[command(flatten)]
    tuning: Tuning,
    #[command(flatten)]
    ceiling: ceiling::Source,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    /// The command that reproduces these results, every parameter spelled out.
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench ingest --concurrency {} --messages {} --warmup {} \
             --latency-seconds {} {} {}{}",
            self.concurrency,
            self.messages,
            self.warmup,
            self.latency_seconds,
            self.tuning.flag(),
            self.ceiling.flags(),
            self.output.flags(),
        )
    }

    fn plan(&self, mode: Mode) -> Plan {
        let messages = match mode {
            Mode::Throughput(_) => self.messages,
            Mode::Latency(rate) => (rate * self.latency_seconds as f64).round().max(1.0) as u64,
        };
        Plan {
            warmup: self.warmup,
            messages,
            connections: self.concurrency,
        }
    }
}

/// Which way the messages come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Publish,
    Ingest,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Self::Publish => "publish",
            Self::Ingest => "ingest (`stripe`)",
        }
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.concurrency == 0 || args.messages == 0 || args.latency_seconds == 0 {
        bail!("--concurrency, --messages and --latency-seconds must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    let (ceiling_rate, _) = args
        .ceiling
        .given_or_measured(args.output.quiet_below)
        .await?;
    println!("{}", header());
    let modes = [
        Mode::Throughput(args.concurrency),
        Mode::Latency(ceiling_rate / deliver::LATENCY_RATE_DIVISOR),
    ];
    let mut runs = Vec::new();
    for setting in args.tuning.settings() {
        for mode in modes {
            for path in [Path::Publish, Path::Ingest] {
                machine::settle(args.output.quiet_below).await?;
                let run = Database::with_fresh(Backend::Sqlite, DEFAULT_POSTGRES_URL, async |db| {
                    measure(path, &setting, mode, db, &args.plan(mode)).await
                })
                .await?;
                let row = row(path, &setting, mode, &run);
                println!("{row}");
                runs.push((path, setting.clone(), mode, run));
            }
        }
    }
    let comparisons = comparisons(&runs);
    for line in &comparisons {
        println!("{line}");
    }
    let mut body = report::table_section(
        &method(&args, ceiling_rate),
        &args.command(),
        &machine,
        &header(),
        runs.iter()
            .map(|(path, setting, mode, run)| row(*path, setting, *mode, run)),
    );
    body.push('\n');
    for line in &comparisons {
        body.push_str(&format!("- {line}\n"));
    }
    args.output.write(SECTION, &body)?;
    if runs.iter().any(|(.., run)| run.flagged()) {
        eprintln!("FLAGGED: requests refused, messages missing or bad signatures");
        for (path, setting, mode, run) in runs.iter().filter(|(.., r)| r.flagged()) {
            eprintln!(
                "{} at {}, {mode:?}: errors {:?}, {} missing, {} bad signatures",
                path.name(),
                setting.name(),
                run.publishes.errors,
                run.missing,
                run.bad_signatures
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// One run of `path` in `mode` on `database`.
async fn measure(
    path: Path,
    setting: &Setting,
    mode: Mode,
    database: &Database,
    plan: &Plan,
) -> anyhow::Result<Run> {
    if path == Path::Publish {
        return deliver::measure(Backend::Sqlite, setting, mode, database, plan).await;
    }
    let (hookd, api) = deliver::start_hookd(database, setting, plan).await?;
    let config = json!({ "secret": STRIPE_SECRET });
    let (source, ingest_url) = api.create_source("bench", "stripe", config).await?;
    let secret = Secret::generate().to_string();
    let receiver = ReceiverProcess::start(std::slice::from_ref(&secret))?;
    api.create_ingest_endpoint(&source, &receiver.url("ingest"), &secret)
        .await?;
    let events = Bodies::with_count(plan.warmup + plan.messages, stripe_event);
    let sender =
        |log| api.stripe_sender(&ingest_url, STRIPE_SECRET.to_owned(), log, events.clone());
    let case = (Backend::Sqlite, setting.clone(), mode);
    deliver::send_to(hookd, sender, &receiver, case, plan).await
}

/// Stripe event `i`: `invoice.paid` with publish's invoice `i` as its object, its own id.
fn stripe_event(i: u64) -> String {
    json!({
        "id": format!("evt_bench_{i:012}"),
        "object": "event",
        "type": "invoice.paid",
        "data": { "object": message(i)["payload"]["invoice"] },
    })
    .to_string()
}

fn header() -> String {
    report::header(&[
        "hookd",
        "path",
        "mode",
        "accepted/s",
        "forwarded/s",
        "p50",
        "p90",
        "p99",
        "max",
        "forwarded",
        "missing / bad signatures / duplicates / refused",
        "hookd CPU",
    ])
}

fn row(path: Path, setting: &Setting, mode: Mode, run: &Run) -> String {
    let mode = match mode {
        Mode::Throughput(concurrency) => format!("throughput, {concurrency} in flight"),
        Mode::Latency(rate) => format!("latency at {}/s", report::thousands(rate.round() as u64)),
    };
    report::row(&[
        setting.name().to_owned(),
        path.name().to_owned(),
        mode,
        report::thousands(run.publishes.throughput().round() as u64),
        report::thousands(run.deliveries_per_s.round() as u64),
        report::millis(run.latency(0.50)),
        report::millis(run.latency(0.90)),
        report::millis(run.latency(0.99)),
        report::millis(run.latency(1.0)),
        report::thousands(run.delivered),
        [
            report::flagged(run.missing),
            report::flagged(run.bad_signatures),
            report::thousands(run.duplicates),
            report::flagged(run.publishes.error_count()),
        ]
        .join(" / "),
        format!("{:.2} cores", run.hookd_cores),
    ])
}

/// Ingest beside publish, per setting: the throughput runs' accepted/s, the latency runs' p99.
fn comparisons(runs: &[(Path, Setting, Mode, Run)]) -> Vec<String> {
    let find = |path: Path, setting: &Setting, throughput: bool| {
        runs.iter()
            .find(|(p, s, m, _)| {
                *p == path && s == setting && matches!(m, Mode::Throughput(_)) == throughput
            })
            .map(|(.., run)| run)
    };
    let settings: Vec<&Setting> = runs
        .iter()
        .filter(|(path, ..)| *path == Path::Ingest)
        .map(|(_, setting, ..)| setting)
        .fold(Vec::new(), |mut seen, setting| {
            if !seen.contains(&setting) {
                seen.push(setting);
            }
            seen
        });
    let mut out = Vec::new();
    for setting in settings {
        if let (Some(ingest), Some(publish)) = (
            find(Path::Ingest, setting, true),
            find(Path::Publish, setting, true),
        ) {
            let (a, b) = (
                ingest.publishes.throughput(),
                publish.publishes.throughput(),
            );
            out.push(format!(
                "At {}: ingest accepted {} requests/s, {} of publish's {} messages/s.",
                setting.name(),
                report::thousands(a.round() as u64),
                report::percent(a / b),
                report::thousands(b.round() as u64),
            ));
        }
        if let (Some(ingest), Some(publish)) = (
            find(Path::Ingest, setting, false),
            find(Path::Publish, setting, false),
        ) {
            out.push(format!(
                "At {}, at the same open-loop rate: p99 send-to-forwarded-receipt {} for \
                 ingest, {} publish-to-receipt.",
                setting.name(),
                report::millis(ingest.latency(0.99)),
                report::millis(publish.latency(0.99)),
            ));
        }
    }
    out
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args, ceiling_rate: f64) -> String {
    format!(
        "## Ingest\n\n\
         Webhooks a provider sends to an ingest source, beside publishes through the API, in \
         the same run. **ingest**: a `stripe` source with one forwarding target; each request \
         a distinct Stripe `invoice.paid` event (~300 bytes) signed with `Stripe-Signature` \
         when sent, POSTed to the source's ingest URL; hookd checks the signature, commits the \
         request, answers 202 and forwards it. **publish**: `POST /api/v1/app/{{app}}/msg` of \
         the same invoice to an application with one endpoint. Both forward to the verifying \
         receiver process, which checks each Standard Webhooks signature; each run on a fresh \
         hookd and SQLite database after {} warm-up requests were forwarded.\n\n\
         - **throughput**: {} requests in flight, {} requests; accepted/s from the client's \
         answers, forwarded/s from the first request sent to the last receipt.\n\
         - **latency**: requests due open loop at an eighth of the ceiling loop rate \
         ({} requests/s in this run, so {}/s) for {} s over at most {} connections; latency \
         from when a request was due to its verified receipt at the target.\n",
        report::thousands(args.warmup),
        args.concurrency,
        report::thousands(args.messages),
        report::thousands(ceiling_rate.round() as u64),
        report::thousands((ceiling_rate / deliver::LATENCY_RATE_DIVISOR).round() as u64),
        args.latency_seconds,
        args.concurrency,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_distinct_stripe_events_of_about_300_bytes() {
        for i in [0, 1, 12_345] {
            let event: serde_json::Value = serde_json::from_str(&stripe_event(i)).unwrap();
            assert_eq!(event["type"], "invoice.paid");
            assert_eq!(event["id"], format!("evt_bench_{i:012}"));
            let length = stripe_event(i).len();
            assert!((250..=450).contains(&length), "{length} bytes");
        }
    }

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Ingest(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&header()]);
        report::page::assert_shows_shape(SECTION, &method(&args, 12_345.0));
    }
}
