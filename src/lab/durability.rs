//! How the lab's servers keep their data: what a crash of each one loses.
//!
//! `durable` (the default, what docker-compose.yml runs): PostgreSQL with
//! `fsync` and `synchronous_commit` on, MariaDB's InnoDB flushing its redo
//! log at every commit, so a committed order survives a
//! crash of the server and of the machine; every Redis with an append-only
//! file, fsynced every second (`everysec`: a process crash loses nothing
//! acknowledged, since Redis writes the file before it answers; a machine
//! crash may lose the last second) or on every write (`always`). `fast`:
//! nothing reaches the disk on purpose (`fsync=off`, no AOF, no RDB), so a
//! crash of a server loses what it held — the lab's old trade of durability
//! for speed, one flag away.

use serde::{Deserialize, Serialize};

/// The lab's persistence mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fsync on, Redis AOF.
    #[default]
    Durable,
    /// Nothing fsynced, no Redis persistence.
    Fast,
}

impl Durability {
    /// The mode's name, as the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Durable => "durable",
            Self::Fast => "fast",
        }
    }
}

/// Redis's AOF fsync policy in the durable mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AofFsync {
    /// fsync once a second, in the background.
    #[default]
    Everysec,
    /// fsync before answering every write (batched per event-loop turn).
    Always,
}

impl AofFsync {
    /// The value of Redis's `appendfsync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Everysec => "everysec",
            Self::Always => "always",
        }
    }
}

/// redis-server's persistence flags for `mode` (also what compose passes).
pub fn redis_args(mode: Durability, fsync: AofFsync) -> Vec<String> {
    let args: &[&str] = match mode {
        Durability::Durable => &["--appendonly", "yes", "--appendfsync", fsync.as_str()],
        Durability::Fast => &["--save", "", "--appendonly", "no"],
    };
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// PostgreSQL's settings for `mode`: PostgreSQL's own defaults when
/// durable, said out loud so the intent is visible.
pub fn postgres_settings(mode: Durability) -> &'static [&'static str] {
    match mode {
        Durability::Durable => &["fsync=on", "synchronous_commit=on", "full_page_writes=on"],
        Durability::Fast => &[
            "fsync=off",
            "synchronous_commit=off",
            "full_page_writes=off",
        ],
    }
}

/// MariaDB's (InnoDB's) settings for `mode`: the redo log flushed and
/// fsynced at every commit with the doublewrite buffer on when durable
/// (InnoDB's defaults, said out loud); written and flushed once a second,
/// no doublewrite, when fast (a crash of the server loses up to a second).
pub fn mysql_settings(mode: Durability) -> &'static [&'static str] {
    match mode {
        Durability::Durable => &[
            "--innodb-flush-log-at-trx-commit=1",
            "--innodb-doublewrite=1",
        ],
        Durability::Fast => &[
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
        ],
    }
}
