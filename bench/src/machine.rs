//! The machine a number was measured on, and how busy it is.
//!
//! A throughput figure means nothing without the CPU, core count, memory, OS and compiler
//! behind it, so every documented result carries this description. The load average check
//! lets a run wait for other work (compiles) to settle before measuring, and the CPU-time
//! readings (of a process, and of the PostgreSQL processes serving one database) show whether
//! hookd, its database or the harness used the cores.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sqlx::{Connection, PgConnection};

/// What the results were measured on.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
    pub rustc: String,
}

impl Machine {
    /// The machine, described and printed at the head of a run's log.
    pub fn announced() -> Self {
        let machine = Self::describe();
        println!("machine: {}", machine.summary());
        machine
    }

    /// Reads /proc, /etc/os-release and `rustc --version`; unknown parts say "unknown".
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = field(&cpuinfo, "model name").unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map_or(0, usize::from);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_gib = field(&meminfo, "MemTotal")
            .and_then(|kib| kib.trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
        let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let distribution = release
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map_or("unknown OS", |v| v.trim_matches('"'))
            .to_owned();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "?".into(), |k| k.trim().to_owned());
        let rustc = Command::new("rustc")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or_else(
                || "unknown rustc".into(),
                |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            );
        Self {
            cpu,
            cores,
            memory_gib,
            os: format!("{distribution}, Linux {kernel}"),
            rustc,
        }
    }

    /// One Markdown-friendly line.
    pub fn summary(&self) -> String {
        format!(
            "{}, {} cores, {:.1} GiB RAM, {}, {}",
            self.cpu, self.cores, self.memory_gib, self.os, self.rustc
        )
    }
}

/// The value of the first `name: value` line.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().to_owned())
    })
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Waits until the 1-minute load average is below `threshold`, for at most `patience`.
/// Returns the last reading and whether it got below.
pub fn wait_until_quiet(threshold: f64, patience: Duration) -> (f64, bool) {
    let deadline = Instant::now() + patience;
    let mut announced = false;
    loop {
        let load = load_average().unwrap_or(0.0);
        if load < threshold {
            return (load, true);
        }
        if Instant::now() >= deadline {
            return (load, false);
        }
        if !announced {
            eprintln!("load average {load:.2} ≥ {threshold}: waiting for the machine to settle…");
            announced = true;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// With a threshold, waits (up to 10 minutes, off the async threads) for the load average to
/// drop below it, warning when it does not; without one, returns at once.
pub async fn settle(quiet_below: Option<f64>) -> anyhow::Result<()> {
    let Some(threshold) = quiet_below else {
        return Ok(());
    };
    let (load, quiet) =
        tokio::task::spawn_blocking(move || wait_until_quiet(threshold, Duration::from_secs(600)))
            .await?;
    if !quiet {
        eprintln!("warning: load average still {load:.2} after 10 minutes; measuring anyway");
    }
    Ok(())
}

/// User + system CPU time of process `pid`, all threads (Linux `/proc/PID/stat`, which counts
/// in clock ticks of 1/100 s on every Linux platform this runs on).
pub fn process_cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after its `)` are plain.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: the 12th and 13th after the name.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .ok_or_else(|| anyhow::anyhow!("short /proc/{pid}/stat"))?
            .parse()?)
    };
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// The CPU time of the PostgreSQL processes that work for one database: the backends connected
/// to it and the server's background processes (WAL writer, checkpointer, …), which serve
/// every database of the server. Read from `/proc`, so the server must run on this machine.
/// A backend that ends within a phase takes its time with it; hookd's pools keep theirs.
pub(crate) struct PostgresCpu {
    conn: PgConnection,
}

impl PostgresCpu {
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let conn = PgConnection::connect(url)
            .await
            .context("cannot connect to read PostgreSQL's processes")?;
        Ok(Self { conn })
    }

    /// Each process's CPU time so far, by pid.
    pub(crate) async fn read(&mut self) -> anyhow::Result<HashMap<i32, Duration>> {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() OR datname IS NULL",
        )
        .fetch_all(&mut self.conn)
        .await?;
        let times: HashMap<i32, Duration> = pids
            .into_iter()
            .filter_map(|pid| Some((pid, process_cpu_time(u32::try_from(pid).ok()?).ok()?)))
            .collect();
        if times.is_empty() {
            bail!("no PostgreSQL process in /proc: the server must run on this machine");
        }
        Ok(times)
    }

    pub(crate) async fn close(self) {
        let _ = self.conn.close().await;
    }
}

/// CPU time the processes of `after` used since `before` (a process new since then, all of
/// its time).
pub(crate) fn used_since(
    after: &HashMap<i32, Duration>,
    before: &HashMap<i32, Duration>,
) -> Duration {
    after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or_default()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_cpu_time_and_the_machine_a_description() {
        assert!(process_cpu_time(std::process::id()).is_ok());
        let machine = Machine::describe();
        assert!(machine.cores >= 1);
        assert!(!machine.summary().is_empty());
    }

    #[test]
    fn fields_are_found_by_name() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(field(text, "model name").as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(field(text, "flags"), None);
    }
}
