//! Where Redis's time goes during a figure: `INFO commandstats` (the
//! microseconds Redis spent in each command, counted as it ran it) read as
//! a figure's measured seconds begin and end, divided by the figure's
//! operations, in two parts:
//!
//! - `script`: the scripts a sale runs (`EVALSHA`, `EVAL`, `FCALL`, and
//!   their read-only forms), the commands they call included;
//! - `writer`: the order's second life, the writers moving orders to
//!   PostgreSQL — `XREADGROUP`, `EXEC` (which holds their `XACK` and
//!   `XDEL`) and `XAUTOCLAIM`.
//!
//! Redis counts a command called from a script or inside `MULTI` both in
//! its own line and in its caller's, so the two parts are read from the
//! top-level commands alone. Neither counts what Redis spends outside
//! commands (reading requests, writing replies, the event loop): the CPU
//! table's `redis` column has the whole.

use std::collections::BTreeMap;

/// The parts, each with the top-level commands it sums.
const PARTS: [(&str, &[&str]); 2] = [
    (
        "script",
        &[
            "evalsha",
            "eval",
            "evalsha_ro",
            "eval_ro",
            "fcall",
            "fcall_ro",
        ],
    ),
    ("writer", &["xreadgroup", "exec", "xautoclaim"]),
];

/// Microseconds spent so far in each command, by its lower-case name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats(BTreeMap<String, u64>);

impl Stats {
    /// Reads the Redis at `url`; empty when it cannot (the figure is then
    /// reported without the split).
    pub async fn read(url: &str) -> Self {
        let Ok(client) = redis::Client::open(url) else {
            return Self::default();
        };
        let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
            return Self::default();
        };
        let info: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await;
        info.map(|text| Self::parse(&text)).unwrap_or_default()
    }

    /// `cmdstat_<name>:calls=…,usec=…,…` lines.
    fn parse(text: &str) -> Self {
        let stats = text
            .lines()
            .filter_map(|line| {
                let (name, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
                let usec = fields
                    .split(',')
                    .find_map(|field| field.strip_prefix("usec="))?
                    .parse()
                    .ok()?;
                Some((name.to_ascii_lowercase(), usec))
            })
            .collect();
        Self(stats)
    }

    /// µs per operation of each part between `self` and `later`, over
    /// `ops` operations; nothing when either reading failed.
    pub fn per_op_us(&self, later: &Stats, ops: u64) -> BTreeMap<String, f64> {
        if self.0.is_empty() || later.0.is_empty() {
            return BTreeMap::new();
        }
        PARTS
            .iter()
            .map(|(part, commands)| {
                let us: u64 = commands
                    .iter()
                    .map(|c| {
                        let before = self.0.get(*c).copied().unwrap_or(0);
                        later.0.get(*c).copied().unwrap_or(0).saturating_sub(before)
                    })
                    .sum();
                let per_op = us as f64 / ops.max(1) as f64;
                ((*part).to_owned(), (per_op * 10.0).round() / 10.0)
            })
            .collect()
    }
}

/// The parts' names, in the table's order.
pub fn names() -> impl Iterator<Item = &'static str> {
    PARTS.iter().map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_commands_are_summed_by_part() {
        let before = Stats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=300,usec_per_call=30.00\r\n\
             cmdstat_get:calls=30,usec=15,usec_per_call=0.50\r\n\
             cmdstat_exec:calls=1,usec=100,usec_per_call=100.00\r\n",
        );
        let after = Stats::parse(
            "cmdstat_evalsha:calls=20,usec=600,usec_per_call=30.00\r\n\
             cmdstat_get:calls=60,usec=30,usec_per_call=0.50\r\n\
             cmdstat_exec:calls=2,usec=200,usec_per_call=100.00\r\n\
             cmdstat_xreadgroup:calls=2,usec=100,usec_per_call=50.00\r\n\
             cmdstat_xack:calls=1,usec=40,usec_per_call=40.00\r\n",
        );
        let split = before.per_op_us(&after, 10);
        assert_eq!(split["script"], 30.0);
        // EXEC holds XACK: it is not counted twice.
        assert_eq!(split["writer"], 20.0);
        assert!(Stats::default().per_op_us(&after, 10).is_empty());
    }
}
