//! Where the machine's cores went during a mark: CPU seconds of every process of the
//! loop, grouped (PostgreSQL's server processes, nats-server, the kairos instances, this
//! bench with its executor), from `/proc/<pid>/stat`, between two samples. On a machine
//! whose cores are all busy the figures say who had them; next to the core count they are
//! the limit every other figure of the mark runs into.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

/// The groups, in print order.
const GROUPS: [&str; 4] = ["postgres", "nats-server", "kairos", "bench"];

/// Cumulative CPU seconds per group at one instant.
#[derive(Debug, Clone)]
pub struct CpuSample {
    at: Instant,
    seconds: HashMap<&'static str, f64>,
}

/// Cores used per group between two samples.
#[derive(Debug, Clone)]
pub struct Cores {
    /// `(group, cores)` in [`GROUPS`] order.
    pub groups: Vec<(&'static str, f64)>,
    /// Seconds between the samples.
    pub over_s: f64,
}

impl Cores {
    /// All groups together.
    pub fn total(&self) -> f64 {
        self.groups.iter().map(|(_, cores)| cores).sum()
    }

    /// CPU seconds `group` used between the samples.
    pub fn seconds(&self, group: &str) -> f64 {
        self.groups
            .iter()
            .filter(|(name, _)| *name == group)
            .map(|(_, cores)| cores * self.over_s)
            .sum()
    }
}

impl CpuSample {
    /// Reads every process now. `instances` are the kairos instances' pids (told by pid:
    /// the binary may have any name); PostgreSQL and nats-server are told by command name
    /// (every server of that name on the machine), the bench is this process.
    pub fn take(instances: &[u32]) -> CpuSample {
        let ticks = clock_ticks();
        let own = std::process::id();
        let mut seconds: HashMap<&'static str, f64> = GROUPS.iter().map(|g| (*g, 0.0)).collect();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return CpuSample {
                at: Instant::now(),
                seconds,
            };
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(stat) = Stat::read(pid, ticks) else {
                continue;
            };
            let group = if instances.contains(&pid) {
                "kairos"
            } else if pid == own {
                "bench"
            } else {
                match stat.comm.as_str() {
                    "postgres" => "postgres",
                    "nats-server" => "nats-server",
                    _ => continue,
                }
            };
            *seconds.entry(group).or_default() += stat.own_s + stat.children_s;
        }
        CpuSample {
            at: Instant::now(),
            seconds,
        }
    }

    /// Cores each group used from `earlier` to `self`.
    pub fn since(&self, earlier: &CpuSample) -> Cores {
        let over_s = self.at.duration_since(earlier.at).as_secs_f64().max(1e-3);
        let groups = GROUPS
            .iter()
            .map(|group| {
                let now = self.seconds.get(group).copied().unwrap_or(0.0);
                let then = earlier.seconds.get(group).copied().unwrap_or(0.0);
                // A process that exited between the samples takes its seconds with it.
                (*group, ((now - then) / over_s).max(0.0))
            })
            .collect();
        Cores { groups, over_s }
    }
}

/// What `/proc/<pid>/stat` says of a process's CPU.
#[derive(Debug, Clone)]
pub struct Stat {
    /// Its command name.
    pub comm: String,
    /// User + system seconds of its own (fields 14 and 15).
    pub own_s: f64,
    /// User + system seconds of the children it has waited for (fields 16 and 17:
    /// PostgreSQL's postmaster collects those of the backends that ended).
    pub children_s: f64,
}

impl Stat {
    /// Reads `pid`'s, with `ticks` clock ticks a second; `None` when it is gone.
    pub fn read(pid: u32, ticks: f64) -> Option<Stat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces; fields are counted after its ')'.
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Some(Stat {
            comm,
            own_s: (field(11) + field(12)) / ticks,
            children_s: (field(13) + field(14)) / ticks,
        })
    }
}

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, asked once; 100 on
/// Linux/x86_64).
pub fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The machine's cores (0 when it cannot tell), printed beside every figure bounded by
/// them.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, usize::from)
}
