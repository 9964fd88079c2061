//! The named failure scenarios (`seckill race --scenario NAME`): one enum
//! that carries each one's name and claim, so the command line, the
//! reports and `--scenario all` cannot disagree on them and the compiler
//! checks every use. Here, beside the hazards, so the race layer's
//! scenarios (which run them) and the reports both read it from below.

use clap::ValueEnum;
use clap::builder::PossibleValue;

/// A failure scenario; each variant's claim is [`Scenario::claim`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// `contention`.
    Contention,
    /// `two-instances-local-lock`.
    TwoInstancesLocalLock,
    /// `lease-expiry`.
    LeaseExpiry,
    /// `frozen-holder`.
    FrozenHolder,
    /// `holder-crash`.
    HolderCrash,
    /// `redlock-minority-down`.
    RedlockMinorityDown,
    /// `segment-scaling`.
    SegmentScaling,
    /// `rate-limit`.
    RateLimit,
    /// `repeatable-read`.
    RepeatableRead,
    /// `redis-crash`.
    RedisCrash,
    /// `slow-disk`.
    SlowDisk,
    /// `power-cut`.
    PowerCut,
    /// `pg-restart`.
    PgRestart,
    /// `instance-kill`.
    InstanceKill,
    /// `partition`.
    Partition,
    /// `redis-failover`.
    RedisFailover,
    /// `cluster-spread`.
    ClusterSpread,
    /// `cluster-failover`.
    ClusterFailover,
    /// `late-payment`.
    LatePayment,
    /// `reaper-crash`.
    ReaperCrash,
    /// `abandoned-carts`.
    AbandonedCarts,
    /// `clock-skew`.
    ClockSkew,
    /// `backend-slowdown`.
    BackendSlowdown,
    /// `restock`.
    Restock,
    /// `pause-resume`.
    PauseResume,
}

impl Scenario {
    /// Every scenario, in the order `--scenario all` runs them.
    pub const ALL: [Self; 25] = [
        Self::Contention,
        Self::TwoInstancesLocalLock,
        Self::LeaseExpiry,
        Self::FrozenHolder,
        Self::HolderCrash,
        Self::RedlockMinorityDown,
        Self::SegmentScaling,
        Self::RateLimit,
        Self::RepeatableRead,
        Self::RedisCrash,
        Self::SlowDisk,
        Self::PowerCut,
        Self::PgRestart,
        Self::InstanceKill,
        Self::Partition,
        Self::RedisFailover,
        Self::ClusterSpread,
        Self::ClusterFailover,
        Self::LatePayment,
        Self::ReaperCrash,
        Self::AbandonedCarts,
        Self::ClockSkew,
        Self::BackendSlowdown,
        Self::Restock,
        Self::PauseResume,
    ];

    /// Its name on the command line and in the reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Contention => "contention",
            Self::TwoInstancesLocalLock => "two-instances-local-lock",
            Self::LeaseExpiry => "lease-expiry",
            Self::FrozenHolder => "frozen-holder",
            Self::HolderCrash => "holder-crash",
            Self::RedlockMinorityDown => "redlock-minority-down",
            Self::SegmentScaling => "segment-scaling",
            Self::RateLimit => "rate-limit",
            Self::RepeatableRead => "repeatable-read",
            Self::RedisCrash => "redis-crash",
            Self::SlowDisk => "slow-disk",
            Self::PowerCut => "power-cut",
            Self::PgRestart => "pg-restart",
            Self::InstanceKill => "instance-kill",
            Self::Partition => "partition",
            Self::RedisFailover => "redis-failover",
            Self::ClusterSpread => "cluster-spread",
            Self::ClusterFailover => "cluster-failover",
            Self::LatePayment => "late-payment",
            Self::ReaperCrash => "reaper-crash",
            Self::AbandonedCarts => "abandoned-carts",
            Self::ClockSkew => "clock-skew",
            Self::BackendSlowdown => "backend-slowdown",
            Self::Restock => "restock",
            Self::PauseResume => "pause-resume",
        }
    }

    /// What the articles say happens in it, which its races put to the
    /// test (docs/scenarios.md says how each is staged); the reports print
    /// it above the scenario's rows.
    pub fn claim(self) -> &'static str {
        match self {
            Self::Contention => {
                "without a shared lock, concurrent buyers oversell; every shared lock, the database and Lua do not"
            }
            Self::TwoInstancesLocalLock => {
                "an in-process lock (`synchronized`) is correct on one instance and wrong on two"
            }
            Self::LeaseExpiry => {
                "a lock whose lease runs out under a slow holder admits a second holder; a watchdog, a fence, a session or the database's own lock do not"
            }
            Self::FrozenHolder => {
                "a watchdog does not help when the whole process pauses, nor does a lease or a session; a fencing token does (Kleppmann)"
            }
            Self::HolderCrash => {
                "a lock must survive its holder's death: the others sell the rest once its lease, session or transaction ends"
            }
            Self::RedlockMinorityDown => {
                "RedLock tolerates a minority of masters down; MultiLock (all masters) does not (antirez)"
            }
            Self::SegmentScaling => "splitting the stock over K locks multiplies throughput",
            Self::RateLimit => {
                "the edge turns a flood away in two layers, cheaply, and never changes what is sold"
            }
            Self::RepeatableRead => {
                "\"the buy method is one transaction, so it is safe\" holds on PostgreSQL and not on MySQL/InnoDB, at the same isolation level"
            }
            Self::RedisCrash => {
                "after Redis crashes, the acknowledged sales are there and no unit is sold twice only if Redis wrote them before answering"
            }
            Self::SlowDisk => {
                "with AOF everysec, a SIGKILL of Redis while its disk is slow loses sales it had acknowledged; with AOF always it loses none"
            }
            Self::PowerCut => {
                "a power cut loses no acknowledged sale only where every server fsyncs before it answers"
            }
            Self::PgRestart => {
                "when PostgreSQL goes away mid-sale no buyer is lied to, and the service comes back by itself"
            }
            Self::InstanceKill => {
                "when an instance dies at full load, no order is lost or sold twice; its buyers are told the outcome is unknown"
            }
            Self::Partition => {
                "a lock service cannot tell a dead holder from a cut-off one; a fence, not the lock, keeps the data safe when the holder comes back (Kleppmann)"
            }
            Self::RedisFailover => {
                "a lock on a replicated Redis is lost when the master dies before its replica has it; RedLock's independent masters are not"
            }
            Self::ClusterSpread => {
                "a Redis Cluster multiplies Redis only for load that spreads: one hot key stays on one master"
            }
            Self::ClusterFailover => {
                "a Redis Cluster replicates asynchronously: a coordinated failover loses nothing, a master that dies ahead of its replica loses its last writes"
            }
            Self::LatePayment => {
                "a job that gives overdue holds back without a state check oversells when a payment lands between its steps; a compare-and-set state machine does not"
            }
            Self::ReaperCrash => {
                "a reaper that dies between its steps sells a unit twice (naive) or leaves it for the next reaper (state machine, delay queue)"
            }
            Self::AbandonedCarts => {
                "when most buyers never pay, the stock cycles back and sells again until every unit is paid, never oversold"
            }
            Self::ClockSkew => {
                "an instance whose clock runs ahead sells before the opening if it judges the window by its own clock; judged by one shared clock, nothing sells early through any instance"
            }
            Self::BackendSlowdown => {
                "when a backend slows, a fixed cap lets requests pile up until every buyer waits past their patience; a limit that adapts to latency keeps the goodput near what the slowed backend can do (Netflix, Envoy, Sentinel)"
            }
            Self::Restock => {
                "stock added to a live sale, while buyers race, is sold exactly once with the rest: none oversold, none lost, a retried addition added once"
            }
            Self::PauseResume => {
                "a live sale paused, resumed and closed early without a reset: once the operator's request answers, no instance sells under the old window; nothing sold or held is lost"
            }
        }
    }

    /// The scenario called `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl ValueEnum for Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.claim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_one_name_and_a_claim() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::named(scenario.name()), Some(scenario));
            assert!(!scenario.claim().is_empty(), "{scenario:?}");
        }
        assert_eq!(Scenario::named("no-such-scenario"), None);
    }
}
