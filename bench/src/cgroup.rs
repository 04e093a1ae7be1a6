//! A process held to a fixed share of a core, and the CPU it used, through the cgroup v1 `cpu`
//! and `cpuacct` controllers.
//!
//! On one machine several hookd processes share the same cores, so adding a process cannot add
//! CPU and a throughput table says nothing of scale-out. Held each to the same share of a core
//! (`cpu.cfs_quota_us` over `cpu.cfs_period_us`), processes behave as if each had a small
//! machine of its own, and `cpuacct.usage` counts exactly what each used. The groups are made
//! under the controllers' mount points (`/sys/fs/cgroup/cpu`, `/sys/fs/cgroup/cpuacct`, or one
//! `cpu,cpuacct` mount) and removed when dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

/// Where cgroup v1 controllers are mounted.
const ROOT: &str = "/sys/fs/cgroup";

/// The quota's period unless given: short, so a held process runs in slices of a millisecond or
/// two rather than all of its share at once followed by a long freeze (the kernel's default
/// period, 100 ms, freezes a process held to a tenth of a core for 90 ms at a time, longer
/// than its receivers' answers take), as a slower core of its own would.
pub const PERIOD: Duration = Duration::from_millis(10);

/// One process's group: its CPU share enforced, its usage counted.
pub struct CpuGroup {
    /// The `cpu` controller's directory of this group.
    cpu: PathBuf,
    /// The `cpuacct` controller's directory (the same as `cpu` on a `cpu,cpuacct` mount).
    cpuacct: PathBuf,
}

impl CpuGroup {
    /// A new group `name` whose processes together get at most `share` of one core in every
    /// `period`.
    pub fn create(name: &str, share: f64, period: Duration) -> anyhow::Result<Self> {
        let (cpu_mount, cpuacct_mount) = mounts()?;
        let cpu = cpu_mount.join(name);
        let cpuacct = cpuacct_mount.join(name);
        for dir in [&cpu, &cpuacct] {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "cannot create the cgroup {} (cgroups must be writable: run as root on \
                     a machine with the cgroup v1 cpu controller mounted)",
                    dir.display()
                )
            })?;
        }
        let group = Self { cpu, cpuacct };
        let period = period.as_micros() as u64;
        let quota = ((share * period as f64).round() as u64).max(1_000);
        group.write(&group.cpu, "cpu.cfs_period_us", period)?;
        group.write(&group.cpu, "cpu.cfs_quota_us", quota)?;
        Ok(group)
    }

    /// Moves process `pid`, every thread of it, into the group.
    pub fn add(&self, pid: u32) -> anyhow::Result<()> {
        self.write(&self.cpu, "cgroup.procs", pid)?;
        if self.cpuacct != self.cpu {
            self.write(&self.cpuacct, "cgroup.procs", pid)?;
        }
        Ok(())
    }

    /// CPU time the group's processes have used since they joined it.
    pub fn usage(&self) -> anyhow::Result<Duration> {
        let path = self.cpuacct.join("cpuacct.usage");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let nanos = text
            .trim()
            .parse()
            .with_context(|| format!("unexpected {}", path.display()))?;
        Ok(Duration::from_nanos(nanos))
    }

    /// How long the quota held the group back so far (`throttled_time` of `cpu.stat`).
    pub fn throttled(&self) -> anyhow::Result<Duration> {
        let path = self.cpu.join("cpu.stat");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        text.lines()
            .find_map(|line| line.strip_prefix("throttled_time ")?.trim().parse().ok())
            .map(Duration::from_nanos)
            .ok_or_else(|| anyhow!("no throttled_time in {}", path.display()))
    }

    fn write(&self, dir: &Path, file: &str, value: impl ToString) -> anyhow::Result<()> {
        let path = dir.join(file);
        std::fs::write(&path, value.to_string())
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

impl Drop for CpuGroup {
    /// Removes the group; its processes must have ended (a group with tasks cannot go).
    fn drop(&mut self) {
        for dir in [&self.cpu, &self.cpuacct] {
            if dir.exists()
                && let Err(error) = remove_when_empty(dir)
            {
                eprintln!(
                    "warning: cannot remove the cgroup {}: {error}",
                    dir.display()
                );
            }
        }
    }
}

/// Removes an emptied group, waiting a moment for an exited process's last threads to leave.
fn remove_when_empty(dir: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(_) if tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(error),
        }
    }
}

/// The directories of the `cpu` and `cpuacct` controllers, which must be writable.
fn mounts() -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = Path::new(ROOT);
    let cpu = root.join("cpu");
    if !cpu.join("cpu.cfs_quota_us").is_file() {
        bail!(
            "no cgroup v1 cpu controller at {} (cpu.cfs_quota_us): holding each process to a \
             share of a core needs it mounted and writable",
            cpu.display()
        );
    }
    let cpuacct = if cpu.join("cpuacct.usage").is_file() {
        cpu.clone()
    } else {
        root.join("cpuacct")
    };
    if !cpuacct.join("cpuacct.usage").is_file() {
        bail!(
            "no cgroup v1 cpuacct controller at {} (cpuacct.usage): counting each process's \
             CPU needs it mounted and writable",
            cpuacct.display()
        );
    }
    Ok((cpu, cpuacct))
}
