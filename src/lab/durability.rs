//! How the lab's servers keep their data: what a crash of each one, and
//! a crash of the machine, loses. Three named choices, one flag
//! (`--durability`), each server's settings derived from it here:
//!
//! - `durable` (the default, what docker-compose.yml runs): PostgreSQL
//!   with `fsync` and `synchronous_commit` on, InnoDB flushing its redo
//!   log at every commit, every Redis with an append-only file fsynced
//!   before it answers (`appendfsync always`). A 200 is on disk: neither
//!   a process crash nor a power cut loses it (the `power-cut` scenario).
//! - `relaxed`: each server acknowledges before its fsync and flushes in
//!   the background about once a second — PostgreSQL
//!   `synchronous_commit=off` (the WAL writer flushes within three
//!   `wal_writer_delay`s), InnoDB `innodb_flush_log_at_trx_commit=2`
//!   (written at commit, fsynced once a second), Redis `appendfsync
//!   everysec`. A power cut loses the last second or so; so can a mere
//!   SIGKILL of Redis while its disk is slow, since `flushAppendOnlyFile`
//!   postpones writing its buffer for up to two seconds while a
//!   background fsync runs, and answers meanwhile (the `slow-disk`
//!   scenario).
//! - `fast`: nothing reaches the disk on purpose (`fsync=off`, InnoDB 0,
//!   no AOF, no RDB), so a crash of a server loses what it held.

use serde::{Deserialize, Serialize};

/// The lab's persistence mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Every acknowledged write fsynced first.
    #[default]
    Durable,
    /// Acknowledged first, fsynced about once a second.
    Relaxed,
    /// Nothing fsynced, no Redis persistence.
    Fast,
}

impl Durability {
    /// Every mode, strongest first.
    pub const ALL: [Self; 3] = [Self::Durable, Self::Relaxed, Self::Fast];

    /// The mode's name, as the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Durable => "durable",
            Self::Relaxed => "relaxed",
            Self::Fast => "fast",
        }
    }
}

/// redis-server's persistence flags for `mode` (also what compose passes).
pub fn redis_args(mode: Durability) -> Vec<String> {
    let args: &[&str] = match mode {
        Durability::Durable => &["--appendonly", "yes", "--appendfsync", "always"],
        Durability::Relaxed => &["--appendonly", "yes", "--appendfsync", "everysec"],
        Durability::Fast => &["--save", "", "--appendonly", "no"],
    };
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// PostgreSQL's settings for `mode`: PostgreSQL's own defaults when
/// durable, said out loud so the intent is visible.
pub fn postgres_settings(mode: Durability) -> &'static [&'static str] {
    match mode {
        Durability::Durable => &["fsync=on", "synchronous_commit=on", "full_page_writes=on"],
        Durability::Relaxed => &["fsync=on", "synchronous_commit=off", "full_page_writes=on"],
        Durability::Fast => &[
            "fsync=off",
            "synchronous_commit=off",
            "full_page_writes=off",
        ],
    }
}

/// MariaDB's (InnoDB's) settings for `mode`: the redo log fsynced at
/// every commit with the doublewrite buffer on when durable (InnoDB's
/// defaults, said out loud); written at commit and fsynced once a second
/// when relaxed; written and flushed once a second, no doublewrite, when
/// fast.
pub fn mysql_settings(mode: Durability) -> &'static [&'static str] {
    match mode {
        Durability::Durable => &[
            "--innodb-flush-log-at-trx-commit=1",
            "--innodb-doublewrite=1",
        ],
        Durability::Relaxed => &[
            "--innodb-flush-log-at-trx-commit=2",
            "--innodb-doublewrite=1",
        ],
        Durability::Fast => &[
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
        ],
    }
}
