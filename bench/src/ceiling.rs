//! `hookd-bench ceiling`: what this machine can do at all for webhook-shaped traffic.
//!
//! A plain loop of signed POSTs (a ~300-byte body, `webhook-id`, `webhook-timestamp`,
//! `webhook-signature` by [`webhook_signature::Signer`], a fresh signature per request) from
//! this process over one pooled client to a plain receiver in another process, no storage.
//! Every message hookd delivers crosses HTTP twice (publish, delivery), so half this rate is
//! the ceiling for end-to-end delivery; the `deliver` benchmark measures against it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use webhook_signature::{Secret, Signer, SigningKey};

use crate::load::{self, Outcome, Requests};
use crate::machine::{self, Machine};
use crate::publish::{Bodies, message};
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "ceiling";

/// How the loop is run.
#[derive(Clone, Debug, clap::Args)]
pub struct Loop {
    /// Requests in flight; each value is measured and the best reported.
    #[arg(id = "ceiling_concurrency", long = "ceiling-concurrency", value_delimiter = ',', default_values_t = [32, 64, 128])]
    pub concurrency: Vec<usize>,
    /// Requests sent per concurrency in the measured phase.
    #[arg(
        id = "ceiling_requests",
        long = "ceiling-requests",
        default_value_t = 100_000
    )]
    pub requests: u64,
    /// Requests sent first and not measured, per concurrency.
    #[arg(
        id = "ceiling_warmup",
        long = "ceiling-warmup",
        default_value_t = 5_000
    )]
    pub warmup: u64,
}

impl Loop {
    /// These options as they are spelled on the command line.
    pub fn flags(&self) -> String {
        format!(
            "--ceiling-concurrency {} --ceiling-requests {} --ceiling-warmup {}",
            report::joined(&self.concurrency, ","),
            self.requests,
            self.warmup
        )
    }
}

/// Where a benchmark that judges against the ceiling gets it: given, or measured.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Use this ceiling loop rate (requests/s) instead of measuring it first.
    #[arg(long)]
    pub ceiling_rate: Option<f64>,
    #[command(flatten)]
    pub run: Loop,
}

impl Source {
    /// The loop's rate, measured once the machine is quiet (see [`crate::machine::settle`]).
    pub async fn measure(&self, quiet_below: Option<f64>) -> anyhow::Result<Ceiling> {
        crate::machine::settle(quiet_below).await?;
        measure(&self.run).await
    }

    /// The given rate, or one measured now (returned too, to report), printed to the log.
    pub async fn given_or_measured(
        &self,
        quiet_below: Option<f64>,
    ) -> anyhow::Result<(f64, Option<Ceiling>)> {
        let (rate, ceiling) = match self.ceiling_rate {
            Some(rate) => (rate, None),
            None => {
                let ceiling = self.measure(quiet_below).await?;
                (ceiling.rate(), Some(ceiling))
            }
        };
        println!("ceiling loop rate: {rate:.0} requests/s");
        Ok((rate, ceiling))
    }

    /// These options as they are spelled on the command line.
    pub fn flags(&self) -> String {
        match self.ceiling_rate {
            Some(rate) => format!("--ceiling-rate {rate}"),
            None => self.run.flags(),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    run: Loop,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        let mut command = format!("target/release/hookd-bench ceiling {}", self.run.flags());
        command.push_str(&self.output.flags());
        command
    }
}

/// One concurrency's measurement.
pub struct Point {
    pub concurrency: usize,
    pub outcome: Outcome,
    /// Cores the sender (this process) and the receiver process kept busy.
    pub sender_cores: f64,
    pub receiver_cores: f64,
}

/// Every concurrency measured, in order.
pub struct Ceiling {
    pub points: Vec<Point>,
}

impl Ceiling {
    /// The point with the highest request rate.
    pub fn best(&self) -> &Point {
        self.points
            .iter()
            .max_by(|a, b| a.outcome.throughput().total_cmp(&b.outcome.throughput()))
            .expect("a ceiling has at least one point")
    }

    /// The loop's best rate, requests per second.
    pub fn rate(&self) -> f64 {
        self.best().outcome.throughput()
    }

    /// A Markdown table of every point.
    pub fn table(&self) -> String {
        let mut out = report::header(&[
            "in flight",
            "requests/s",
            "p50",
            "p99",
            "errors",
            "sender CPU",
            "receiver CPU",
        ]);
        for p in &self.points {
            out.push('\n');
            out.push_str(&report::row(&[
                p.concurrency.to_string(),
                report::thousands(p.outcome.throughput().round() as u64),
                report::millis(p.outcome.latency(0.50)),
                report::millis(p.outcome.latency(0.99)),
                report::thousands(p.outcome.error_count()),
                format!("{:.2} cores", p.sender_cores),
                format!("{:.2} cores", p.receiver_cores),
            ]));
        }
        out
    }

    pub fn errors(&self) -> u64 {
        self.points.iter().map(|p| p.outcome.error_count()).sum()
    }
}

/// Measures the loop at each concurrency of `run`, against one receiver process.
pub async fn measure(run: &Loop) -> anyhow::Result<Ceiling> {
    if run.concurrency.is_empty() || run.concurrency.contains(&0) || run.requests == 0 {
        bail!("--ceiling-concurrency values and --ceiling-requests must be at least 1");
    }
    let receiver = ReceiverProcess::start(&[])?;
    let mut points = Vec::new();
    for &concurrency in &run.concurrency {
        let send = sender(&receiver.url("ceiling"), concurrency)?;
        load::run(concurrency, 0..run.warmup, send.clone()).await;
        let sender_cpu = machine::process_cpu_time(std::process::id())?;
        let receiver_cpu = machine::process_cpu_time(receiver.pid())?;
        let end = run.warmup + run.requests;
        let outcome = load::run(concurrency, run.warmup..end, send).await;
        let seconds = outcome.elapsed.as_secs_f64();
        let busy = |now: Duration, before: Duration| now.saturating_sub(before).as_secs_f64();
        let point = Point {
            concurrency,
            sender_cores: busy(machine::process_cpu_time(std::process::id())?, sender_cpu)
                / seconds,
            receiver_cores: busy(machine::process_cpu_time(receiver.pid())?, receiver_cpu)
                / seconds,
            outcome,
        };
        println!(
            "ceiling: {concurrency} in flight: {} requests/s",
            report::thousands(point.outcome.throughput().round() as u64)
        );
        points.push(point);
    }
    Ok(Ceiling { points })
}

/// A signed POST of a ~300-byte body to `url`, expecting a 2xx, over a client pooling
/// `concurrency` connections.
fn sender(url: &str, concurrency: usize) -> anyhow::Result<Requests> {
    let url = reqwest::Url::parse(url).context("the receiver URL")?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .build()
        .context("cannot build the HTTP client")?;
    let signer = Arc::new(Signer::from(SigningKey::Hmac(Secret::generate())));
    let bodies = Bodies::new(|i| message(i)["payload"].to_string());
    let json = HeaderValue::from_static("application/json");
    Ok(Arc::new(move |i| {
        let body = bodies.get(i);
        let id = format!("msg_{i}");
        let timestamp = webhook_signature::clock::unix_now();
        let request = signer.headers(&id, timestamp, &body).map(|headers| {
            let mut request = client.post(url.clone()).header(CONTENT_TYPE, json.clone());
            for (name, value) in headers.pairs() {
                request = request.header(name, value);
            }
            request.body(body)
        });
        Box::pin(async move {
            let request = request.map_err(|e| format!("signing: {e}"))?;
            let response = request
                .send()
                .await
                .map_err(|e| crate::load::transport_error(&e))?;
            let status = response.status();
            response
                .bytes()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("HTTP {}", status.as_u16()))
            }
        })
    }))
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let machine = Machine::announced();
    machine::settle(args.output.quiet_below).await?;
    let ceiling = measure(&args.run).await?;
    println!("{}", ceiling.table());
    args.output
        .write(SECTION, &section(&args, &machine, &ceiling))?;
    if ceiling.errors() > 0 {
        eprintln!("FLAGGED: some requests failed; these numbers are not valid");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "## The machine's ceiling\n\n\
         A plain loop of signed POSTs, no hookd and no storage: a ~300-byte JSON body (one of \
         1,024 built once) with `webhook-id`, `webhook-timestamp` and a fresh \
         `webhook-signature` (HMAC-SHA256, the `webhook-signature` crate's `Signer`) per \
         request, from the harness over one pooled HTTP/1.1 client to a plain receiver in \
         another process (`hookd-bench receive`, answering 204); {} warm-up requests, then {} \
         measured per concurrency. Every message hookd delivers crosses HTTP twice (publish, \
         then delivery), so **half the best rate here is the ceiling for end-to-end delivery** \
         on this machine; `deliver` and `fanout` measure it again in their own runs and judge \
         their targets against that.\n",
        report::thousands(args.run.warmup),
        report::thousands(args.run.requests),
    )
}

fn section(args: &Args, machine: &Machine, ceiling: &Ceiling) -> String {
    let best = ceiling.best();
    format!(
        "{}\n\
         - Command: `cargo build --release -p hookd-bench && {}`\n\
         - Date: {}; machine: {}\n\n\
         {}\n\n\
         Best: {} requests/s at {} in flight; end-to-end ceiling (half): {} messages/s.\n",
        method(args),
        args.command(),
        report::now(),
        machine.summary(),
        ceiling.table(),
        report::thousands(ceiling.rate().round() as u64),
        best.concurrency,
        report::thousands((ceiling.rate() / 2.0).round() as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Ceiling(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args)]);
        report::page::assert_shows(SECTION, &Ceiling { points: Vec::new() }.table());
    }
}
