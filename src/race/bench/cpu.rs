//! Where a figure's CPU goes: the CPU time of each group of the lab's
//! processes (and of the bench's own client) over a figure's measured
//! seconds, from `/proc/<pid>/stat`, divided by the figure's operations.
//!
//! A group is its processes and every process below them (PostgreSQL
//! forks a backend per connection, nginx its workers), read from one scan
//! of `/proc` per snapshot; `utime + stime` covers every thread of a
//! process, and `cutime + cstime` the children it has reaped — a backend
//! whose connection closed before the window's end (the bench's own pool,
//! closed as its figure ends) is gone from `/proc`, and its time with it,
//! unless counted in its parent. The client is the bench's own process
//! alone, without its children (the lab's processes, wrk). Linux only, as
//! the lab is.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::commands;
use crate::lab::ProcessInfo;

/// The groups, in the table's order, and which lab processes start each:
/// by name, or by the name's prefix.
const GROUPS: [(&str, &[&str]); 6] = [
    ("client", &[]),
    ("nginx", &["nginx"]),
    ("instances", &["instance-"]),
    ("redis", &["redis"]),
    ("postgres", &["postgres"]),
    ("mariadb", &["mysql"]),
];

/// The names of the groups, in the table's order.
pub fn names() -> impl Iterator<Item = &'static str> {
    GROUPS.iter().map(|(name, _)| *name)
}

/// Each group's root processes, and whether the processes below them
/// count too.
#[derive(Debug, Clone)]
pub struct Groups {
    groups: Vec<(&'static str, Vec<u32>, bool)>,
    /// The Redis whose `INFO commandstats` each window also reads.
    redis_url: String,
}

impl Groups {
    /// The groups of a lab's `processes`; the client is this process.
    /// Each window also reads the commands of the Redis at `redis_url`
    /// ([`commands`]).
    pub fn of(processes: &[ProcessInfo], redis_url: &str) -> Self {
        let groups = GROUPS
            .iter()
            .map(|(group, prefixes)| match *group {
                "client" => (*group, vec![std::process::id()], false),
                _ => {
                    let pids = processes
                        .iter()
                        .filter(|p| prefixes.iter().any(|prefix| p.name.starts_with(prefix)))
                        .filter_map(|p| p.pid)
                        .collect();
                    (*group, pids, true)
                }
            })
            .collect();
        Self {
            groups,
            redis_url: redis_url.to_owned(),
        }
    }

    /// [`Groups::snapshot`] on a blocking thread: it reads all of
    /// `/proc`.
    async fn snapshot_off_runtime(&self) -> Snapshot {
        let groups = self.clone();
        tokio::task::spawn_blocking(move || groups.snapshot())
            .await
            .unwrap_or_default()
    }

    /// Each group's CPU time so far, in clock ticks.
    fn snapshot(&self) -> Snapshot {
        let table = ProcTable::read();
        Snapshot(
            self.groups
                .iter()
                .map(|(group, roots, deep)| (*group, table.ticks(roots, *deep)))
                .collect(),
        )
    }
}

/// Runs `load` (a figure: `warmup`, then `duration` measured), with a
/// snapshot of `groups` as the measured seconds begin and as they end.
pub async fn around<T>(
    groups: &Groups,
    (warmup, duration): (Duration, Duration),
    load: impl Future<Output = T>,
) -> (T, Window) {
    let groups = groups.clone();
    let sampler = tokio::spawn(async move {
        tokio::time::sleep(warmup).await;
        let begin = groups.snapshot_off_runtime().await;
        let commands_begin = commands::Stats::read(&groups.redis_url).await;
        tokio::time::sleep(duration).await;
        let end = groups.snapshot_off_runtime().await;
        let commands_end = commands::Stats::read(&groups.redis_url).await;
        Window {
            begin,
            end,
            commands: (commands_begin, commands_end),
            seconds: duration.as_secs_f64(),
        }
    });
    let out = load.await;
    let window = sampler.await.unwrap_or_default();
    (out, window)
}

/// The snapshots at a figure's measured seconds' begin and end.
#[derive(Debug, Clone, Default)]
pub struct Window {
    begin: Snapshot,
    end: Snapshot,
    /// Redis's commands at the begin and the end.
    commands: (commands::Stats, commands::Stats),
    seconds: f64,
}

impl Window {
    /// How long the measured seconds were.
    pub fn seconds(&self) -> f64 {
        self.seconds
    }

    /// µs of CPU per operation of each group, over `ops` operations.
    pub fn per_op_us(&self, ops: u64) -> BTreeMap<String, f64> {
        self.begin.per_op_us(&self.end, ops)
    }

    /// µs of Redis's command time per operation, by part
    /// ([`commands`]), over `ops` operations.
    pub fn redis_per_op_us(&self, ops: u64) -> BTreeMap<String, f64> {
        let (begin, end) = &self.commands;
        begin.per_op_us(end, ops)
    }
}

/// Each group's CPU time at one moment, in clock ticks.
#[derive(Debug, Clone, Default)]
pub struct Snapshot(BTreeMap<&'static str, u64>);

impl Snapshot {
    /// µs of CPU per operation of each group between `self` and `later`,
    /// over `ops` operations.
    fn per_op_us(&self, later: &Snapshot, ops: u64) -> BTreeMap<String, f64> {
        let us_per_tick = 1e6 / clock_ticks_per_sec();
        later
            .0
            .iter()
            .map(|(group, after)| {
                let before = self.0.get(group).copied().unwrap_or(0);
                let us = after.saturating_sub(before) as f64 * us_per_tick;
                let per_op = us / ops.max(1) as f64;
                ((*group).to_owned(), (per_op * 10.0).round() / 10.0)
            })
            .collect()
    }
}

/// Every process's parent and CPU ticks, from one scan of `/proc`.
struct ProcTable {
    /// pid → its [`Stat`].
    processes: HashMap<u32, Stat>,
}

/// What a snapshot reads of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    /// Its parent.
    parent: u32,
    /// `utime + stime`: its own threads.
    own: u64,
    /// `cutime + cstime`: the children it has waited for.
    reaped: u64,
}

impl ProcTable {
    fn read() -> Self {
        let mut processes = HashMap::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Self { processes };
        };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            // A process that exited since the listing is skipped.
            if let Some(stat) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|text| parse_stat(&text))
            {
                processes.insert(pid, stat);
            }
        }
        Self { processes }
    }

    /// The ticks of `roots` and, `deep`, of every process below them.
    fn ticks(&self, roots: &[u32], deep: bool) -> u64 {
        if !deep {
            return roots
                .iter()
                .filter_map(|pid| self.processes.get(pid))
                .map(|stat| stat.own)
                .sum();
        }
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (pid, stat) in &self.processes {
            children.entry(stat.parent).or_default().push(*pid);
        }
        let mut total = 0;
        let mut stack: Vec<u32> = roots.to_vec();
        while let Some(pid) = stack.pop() {
            if let Some(stat) = self.processes.get(&pid) {
                total += stat.own + stat.reaped;
            }
            stack.extend(children.get(&pid).into_iter().flatten());
        }
        total
    }
}

/// A `/proc/<pid>/stat` line's [`Stat`]. The command name may hold
/// spaces and parentheses: fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), …, utime (14), stime (15),
    // cutime (16), cstime (17).
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Stat {
        parent: fields.get(1)?.parse().ok()?,
        own: number(11)? + number(12)?,
        reaped: number(13)? + number(14)?,
    })
}

/// The kernel's clock ticks per second (`_SC_CLK_TCK`, 100 on Linux).
fn clock_ticks_per_sec() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |ticks| ticks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_names_last_parenthesis() {
        let line = "42 (a (weird) name) S 7 42 42 0 -1 4194560 100 0 0 0 250 31 9 3 20 0 4 0";
        let stat = Stat {
            parent: 7,
            own: 281,
            reaped: 12,
        };
        assert_eq!(parse_stat(line), Some(stat));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn cpu_this_process_burns_is_counted() {
        let me = std::process::id();
        let before = ProcTable::read().ticks(&[me], false);
        // At least 100 ms of CPU: ten ticks or more, however busy the
        // machine (it is CPU time, not wall time).
        let started = cpu_time();
        let mut x = 0u64;
        while cpu_time() - started < 0.1 {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
        let after = ProcTable::read();
        assert!(after.ticks(&[me], false) > before);
        // Below the test process: at least itself.
        assert!(after.ticks(&[me], true) >= after.ticks(&[me], false));
    }

    #[test]
    fn a_child_that_exited_is_counted_in_its_parent() {
        let me = std::process::id();
        let before = ProcTable::read().ticks(&[me], true);
        // A child busy for half a second of wall time, then waited for.
        let status = std::process::Command::new("sh")
            .args(["-c", "end=$(( $(date +%s%N) + 500000000 )); while [ $(date +%s%N) -lt $end ]; do :; done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let table = ProcTable::read();
        assert!(table.ticks(&[me], true) > before);
        // Not in the process's own time: the client column leaves it out.
        assert!(table.processes[&me].reaped > 0);
    }

    /// This process's CPU time in seconds, from the kernel's own clock.
    fn cpu_time() -> f64 {
        let time = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .expect("a CPU clock");
        time.tv_sec() as f64 + time.tv_nsec() as f64 / 1e9
    }
}
