//! `hookd-bench instructions`: CPU instructions per delivered message, counted by callgrind.
//!
//! Deliveries per second move with everything else the machine does; instructions do not:
//! `valgrind --tool=callgrind` counts what hookd executes (every thread, user space), the same
//! for the same binary and inputs whatever the load beside it. So this is the figure to compare
//! builds by. hookd runs on SQLite with one endpoint, at its defaults unless `--tuned` flags
//! are given, under callgrind; the harness publishes through the API and a receiver verifies
//! every delivery, as in `deliver`. One run publishes `--baseline` messages, the other
//! `--baseline` + `--messages`; each waits until all are delivered, then stops hookd with
//! SIGTERM so that callgrind writes its totals. The difference over `--messages` is the cost of
//! one message, start-up, shutdown and warm-up cancelled out.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::api::Api;
use crate::deliver::drain;
use crate::hookd::{Backend, Before, Database, Hookd, PostgresServer, Setting};
use crate::load;
use crate::machine::Machine;
use crate::receiver::ReceiverProcess;
use crate::report;

/// The docs section this benchmark owns.
const SECTION: &str = "instructions";

/// Instructions per delivered message this build should stay under, at the defaults.
const TARGET_PER_MESSAGE: u64 = 250_000;

/// Under callgrind hookd starts and runs tens of times slower.
const START_PATIENCE: Duration = Duration::from_secs(600);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Messages published (and delivered) in both runs.
    #[arg(long, default_value_t = 1_000)]
    baseline: u64,
    /// Messages the second run publishes beyond the baseline: the ones counted.
    #[arg(long, default_value_t = 2_000)]
    messages: u64,
    /// Publishes in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Keep the larger run's callgrind output at this path (read it with `callgrind_annotate`;
    /// build with `--profile profiling` for line-level names).
    #[arg(long)]
    keep_profile: Option<std::path::PathBuf>,
    /// hookd flags to count with instead of its defaults.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    tuned: String,
    #[command(flatten)]
    before: Before,
    #[command(flatten)]
    postgres: PostgresServer,
    #[command(flatten)]
    output: report::Output,
}

impl Args {
    fn setting(&self) -> Setting {
        let flags: Vec<String> = self.tuned.split_whitespace().map(str::to_owned).collect();
        if flags.is_empty() {
            Setting::Defaults
        } else {
            Setting::Tuned(flags)
        }
    }

    fn command(&self) -> String {
        let tuned = match self.setting() {
            Setting::Tuned(flags) => format!(" --tuned '{}'", flags.join(" ")),
            Setting::Defaults | Setting::Before(_) => String::new(),
        };
        format!(
            "target/release/hookd-bench instructions --baseline {} --messages {} \
             --concurrency {}{tuned}{}{}",
            self.baseline,
            self.messages,
            self.concurrency,
            self.before.flag(),
            self.output.flags(),
        )
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.baseline == 0 || args.messages == 0 || args.concurrency == 0 {
        bail!("--baseline, --messages and --concurrency must be at least 1");
    }
    crate::hookd::binary()?;
    let machine = Machine::announced();
    let mut lines = Vec::new();
    if let Some(earlier) = args.before.setting()? {
        lines.push(
            per_message(&earlier, &args, None)
                .await?
                .line(&args, &earlier),
        );
    }
    let setting = args.setting();
    let counted = per_message(&setting, &args, args.keep_profile.as_deref()).await?;
    lines.push(counted.line(&args, &setting));
    if setting == Setting::Defaults {
        lines.push(counted.verdict());
    }
    for line in &lines {
        println!("{line}");
    }
    args.output
        .write(SECTION, &section(&args, &machine, &lines.join("\n\n")))?;
    Ok(ExitCode::SUCCESS)
}

/// The two runs' counts of one build and setting; the larger run's profile kept at `keep`.
async fn per_message(
    setting: &Setting,
    args: &Args,
    keep: Option<&std::path::Path>,
) -> anyhow::Result<Counted> {
    let baseline = count(args.baseline, setting, args, None).await?;
    println!(
        "hookd at {}, {} messages: {} instructions",
        setting.label(),
        args.baseline,
        report::thousands(baseline)
    );
    let total = args.baseline + args.messages;
    let more = count(total, setting, args, keep).await?;
    println!("{total} messages: {} instructions", report::thousands(more));
    let Some(per_message) = more.checked_sub(baseline).map(|d| d / args.messages) else {
        bail!("the larger run counted fewer instructions ({more} < {baseline})");
    };
    Ok(Counted {
        baseline,
        more,
        per_message,
    })
}

/// Instructions hookd executes from its start until it has exited after delivering
/// `messages` messages.
async fn count(
    messages: u64,
    setting: &Setting,
    args: &Args,
    keep: Option<&std::path::Path>,
) -> anyhow::Result<u64> {
    let database = Database::create(Backend::Sqlite, &args.postgres.url).await?;
    let out_file = std::env::temp_dir().join(format!(
        "hookd-callgrind-{}.out",
        crate::hookd::random_hex()
    ));
    let result = count_into(messages, setting, &database, &out_file, args).await;
    database.remove().await;
    if let Some(keep) = keep {
        std::fs::rename(&out_file, keep)
            .or_else(|_| std::fs::copy(&out_file, keep).map(drop))
            .with_context(|| format!("cannot keep the profile at {}", keep.display()))?;
    }
    let _ = std::fs::remove_file(&out_file);
    result
}

async fn count_into(
    messages: u64,
    setting: &Setting,
    database: &Database,
    out_file: &std::path::Path,
    args: &Args,
) -> anyhow::Result<u64> {
    let wrapper = [
        "valgrind".to_owned(),
        "--tool=callgrind".to_owned(),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    let (url, setting) = (database.url().to_owned(), setting.clone());
    let hookd = tokio::task::spawn_blocking(move || {
        Hookd::start_under(&wrapper, START_PATIENCE, &url, &setting)
    })
    .await??;
    let api = Api::new(&hookd, args.concurrency)?;
    let app = api.create_app("instructions").await?;
    let endpoint = api
        .create_endpoint(&app, "http://127.0.0.1:9/unset")
        .await?;
    let secret = api.endpoint_secret(&app, &endpoint).await?;
    let receiver = ReceiverProcess::start(&[secret])?;
    api.set_endpoint_url(&app, &endpoint, &receiver.url("instructions"))
        .await?;
    let publishes = load::run(args.concurrency, 0..messages, api.publisher(&app, None)?).await;
    if publishes.error_count() > 0 {
        bail!("{} publishes failed", publishes.error_count());
    }
    drain(&receiver, messages).await?;
    let delivered = receiver.count().await?;
    if delivered < messages {
        bail!("only {delivered} of {messages} messages arrived");
    }
    tokio::task::spawn_blocking(move || hookd.terminate()).await??;
    totals(out_file)
}

/// The `totals:` (or `summary:`) line of a callgrind output file: instructions executed.
fn totals(path: &std::path::Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("callgrind wrote no {}", path.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no totals line in {}", path.display()))
}

/// Instructions counted in the smaller run (`baseline`) and the larger (`more`), and the
/// difference per message of the `--messages` more.
struct Counted {
    baseline: u64,
    more: u64,
    per_message: u64,
}

impl Counted {
    /// The figure, as the section shows it.
    fn line(&self, args: &Args, setting: &Setting) -> String {
        format!(
            "Instructions per delivered message (SQLite, one endpoint, hookd at {}): **{}** \
             ({} for {} messages, {} for {}).",
            setting.label(),
            report::thousands(self.per_message),
            report::thousands(self.baseline),
            report::thousands(args.baseline),
            report::thousands(self.more),
            report::thousands(args.baseline + args.messages),
        )
    }

    /// Whether the figure meets the target.
    fn verdict(&self) -> String {
        format!(
            "Target (under {} instructions per delivered message at the defaults): **{}**.",
            report::thousands(TARGET_PER_MESSAGE),
            if self.per_message < TARGET_PER_MESSAGE {
                "met"
            } else {
                "not met"
            },
        )
    }
}

/// What the section says of the method: everything before the figures.
fn method(args: &Args) -> String {
    format!(
        "Counted with `valgrind --tool=callgrind` around hookd on SQLite, one endpoint, {} \
         publishes in flight, in a run of {} messages and one of {} (start-up, warm-up and \
         shutdown included in both); the difference, over the {} more, is the figure.\n",
        args.concurrency,
        report::thousands(args.baseline),
        report::thousands(args.baseline + args.messages),
        report::thousands(args.messages),
    )
}

/// The docs section: what was measured, how, where, and the table.
fn section(args: &Args, machine: &Machine, line: &str) -> String {
    format!(
        "{}\n{}\n{line}\n",
        method(args),
        report::provenance(&args.command(), machine),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_what_this_writes() {
        let crate::Command::Instructions(args) = crate::recorded(SECTION) else {
            panic!("the `{SECTION}` section records another benchmark");
        };
        report::page::assert_records(SECTION, &args.command(), &[&method(&args)]);
        let counted = Counted {
            baseline: 452_715_397,
            more: 1_282_053_943,
            per_message: 414_669,
        };
        report::page::assert_shows_shape(SECTION, &counted.line(&args, &Setting::Defaults));
    }
}
