//! `hookd-bench suite`: every benchmark, one after the other, with one command.
//!
//! Each benchmark runs as a child process of this same binary with the arguments it would be
//! given by hand, so every section of `docs/benchmarks.md` records the exact command that
//! reproduces it, and a benchmark that fails (or flags lost messages) does not stop the
//! others. The suite's own section records the suite command, the machine and how each part
//! ended. `--quick` shrinks every benchmark to a few seconds, to check that the suite works;
//! its numbers mean little.

use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context;

use crate::hookd::{Backend, Backends};
use crate::machine::Machine;
use crate::report;

/// The docs section this command owns.
const SECTION: &str = "suite";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Database(s) every benchmark runs on.
    #[arg(long, value_enum, default_value = "both")]
    backend: Backends,
    /// Tiny sizes everywhere: checks that the suite runs, measures little.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn command(&self) -> String {
        format!(
            "target/release/hookd-bench suite --backend {}{}{}",
            self.backend.flag(),
            if self.quick { " --quick" } else { "" },
            self.output.flags()
        )
    }

    /// The benchmarks and their arguments, in the order they run.
    fn plan(&self) -> Vec<(&'static str, Vec<String>)> {
        let backend = ["--backend", self.backend.flag()];
        let ceiling_quick = [
            "--ceiling-concurrency",
            "32",
            "--ceiling-requests",
            "5000",
            "--ceiling-warmup",
            "500",
        ];
        let fanout_quick = [
            &["--endpoints", "100", "--messages", "20"][..],
            &ceiling_quick,
        ]
        .concat();
        let with_postgres = self.backend.list().contains(&Backend::Postgres);
        // hookd runs on SQLite there whatever `--backend` says; the producers' databases
        // include PostgreSQL when it is among them.
        let source_kinds = [
            "--kinds",
            if with_postgres {
                "postgres,mysql,sqlite"
            } else {
                "mysql,sqlite"
            },
        ];
        let plan: [(&str, &[&str], &[&str]); 15] = [
            (
                "publish",
                &backend,
                &["--messages", "3000", "--warmup", "300", "--runs", "1"],
            ),
            ("ceiling", &[], &ceiling_quick),
            (
                "deliver",
                &backend,
                &[
                    "--concurrency",
                    "32",
                    "--messages",
                    "2000",
                    "--warmup",
                    "200",
                    "--latency-seconds",
                    "3",
                    "--ceiling-concurrency",
                    "32",
                    "--ceiling-requests",
                    "5000",
                    "--ceiling-warmup",
                    "500",
                ],
            ),
            ("fanout", &backend, &fanout_quick),
            (
                "isolation",
                &backend,
                &["--rate", "50", "--seconds", "5", "--idle-endpoints", "100"],
            ),
            ("memory", &backend, &["--backlog", "2000"]),
            (
                "retention",
                &backend,
                &["--backlog", "2000", "--rate", "200", "--seconds", "3"],
            ),
            (
                "replay",
                &backend,
                &["--messages", "2000", "--baseline-seconds", "2"],
            ),
            (
                "ordered",
                &backend,
                &["--messages", "2000", "--one-key-messages", "100"],
            ),
            // SQLite only, under callgrind: minutes at its own defaults.
            (
                "instructions",
                &[],
                &["--baseline", "50", "--messages", "100"],
            ),
            // hookd's store in this process, no HTTP.
            (
                "storage",
                &backend,
                &["--messages", "2000", "--warmup", "200"],
            ),
            // PostgreSQL only (skipped for `--backend sqlite`): several processes on one
            // database, and the outbox.
            (
                "cluster",
                &[],
                &[
                    "--rounds",
                    "1",
                    "--messages",
                    "1000",
                    "--warmup",
                    "100",
                    "--outbox-seconds",
                    "3",
                ],
            ),
            // Outbox sources in a PostgreSQL, MySQL/MariaDB and SQLite producer database.
            (
                "sources",
                &source_kinds,
                &["--seconds", "3", "--backlog", "2000"],
            ),
            // SQLite only, with the local RabbitMQ.
            (
                "destinations",
                &[],
                &["--messages", "2000", "--warmup", "200"],
            ),
            // SQLite only: a `stripe` ingest source beside publishing.
            (
                "ingest",
                &[],
                &[
                    &[
                        "--messages",
                        "2000",
                        "--warmup",
                        "200",
                        "--latency-seconds",
                        "3",
                    ][..],
                    &ceiling_quick,
                ]
                .concat(),
            ),
        ];
        plan.into_iter()
            .filter(|(name, _, _)| *name != "cluster" || with_postgres)
            .map(|(name, common, quick)| {
                let mut args: Vec<String> = common.iter().map(|a| (*a).to_owned()).collect();
                if self.quick {
                    args.extend(quick.iter().map(|a| (*a).to_owned()));
                }
                if let Some(load) = self.output.quiet_below {
                    args.extend(["--quiet-below".to_owned(), load.to_string()]);
                }
                if self.output.write_docs {
                    args.push("--write-docs".to_owned());
                }
                if let Some(file) = &self.output.docs_file {
                    args.extend(["--docs-file".to_owned(), file.display().to_string()]);
                }
                (name, args)
            })
            .collect()
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    crate::hookd::binary()?;
    let me = std::env::current_exe().context("cannot tell where hookd-bench runs from")?;
    let machine = Machine::announced();
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for (name, bench_args) in args.plan() {
        println!("\n=== hookd-bench {name} {}", bench_args.join(" "));
        let ran = Instant::now();
        let status = tokio::task::spawn_blocking({
            let me = me.clone();
            move || Command::new(me).arg(name).args(&bench_args).status()
        })
        .await?
        .with_context(|| format!("cannot run hookd-bench {name}"))?;
        let failed = (!status.success()).then(|| status.to_string());
        outcomes.push((name, failed, ran.elapsed().as_secs()));
    }
    let minutes = started.elapsed().as_secs() / 60;
    let body = section(&args.command(), &machine, minutes, &outcomes);
    println!("\n{body}");
    args.output.write(SECTION, &body)?;
    if outcomes.iter().any(|(_, failed, _)| failed.is_some()) {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// How each benchmark ended: its name, how it failed (if it did) and the seconds it took.
type Outcome = (&'static str, Option<String>, u64);

/// The docs section: the suite's command, where and when it ran, and how each part ended.
fn section(command: &str, machine: &Machine, minutes: u64, outcomes: &[Outcome]) -> String {
    format!(
        "The suite's last run, each benchmark as its own `hookd-bench` child process:\n\n\
         {}\
         - {}\n",
        report::provenance(command, machine),
        took(minutes, outcomes),
    )
}

/// The suite's last line: how long it took, each benchmark's time and how it ended.
fn took(minutes: u64, outcomes: &[Outcome]) -> String {
    let parts: Vec<String> = outcomes
        .iter()
        .map(|(name, failed, seconds)| match failed {
            None => format!("{name} {seconds} s"),
            Some(status) => format!("{name} {seconds} s (**failed or flagged: {status}**)"),
        })
        .collect();
    let all = if outcomes.iter().all(|(_, failed, _)| failed.is_none()) {
        "; every benchmark completed"
    } else {
        ""
    };
    format!("Took {minutes} min: {}{all}.", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Suite(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        assert_eq!(args.command(), report::page::command(SECTION));
        let ran = [
            ("publish", 106),
            ("ceiling", 34),
            ("deliver", 205),
            ("fanout", 114),
            ("isolation", 206),
            ("memory", 178),
            ("cluster", 188),
        ];
        let outcomes: Vec<Outcome> = ran.iter().map(|&(n, s)| (n, None, s)).collect();
        report::page::assert_shows_shape(SECTION, &took(17, &outcomes));
        assert_eq!(
            took(1, &[("publish", None, 3)]),
            "Took 1 min: publish 3 s; every benchmark completed."
        );
        let failed = [("deliver", Some("exit status: 1".to_owned()), 9)];
        assert_eq!(
            took(1, &failed),
            "Took 1 min: deliver 9 s (**failed or flagged: exit status: 1**)."
        );
    }
}
