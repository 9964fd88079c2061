//! `frozen-holder`: the instance holding the lock is frozen (SIGSTOP) for
//! longer than the lease and than ZooKeeper's session timeout — a GC pause,
//! as Kleppmann tells it — another instance tries to buy meanwhile, then
//! the frozen one is resumed (SIGCONT) and finishes its critical section.
//!
//! Every lease- or session-based lock oversells: `redis-lock`, `redlock`
//! and `db-lock-table` because the lease ran out under the sleeper,
//! `redisson` because its watchdog froze with its process, `zookeeper`
//! because the server ended the silent session and deleted its node. Each
//! resumed holder writes from its stale read. `fenced` does not: the
//! second holder's newer token reached the store first, so the resumed
//! holder's write is refused and its buyer gets `busy`. `db-pessimistic`,
//! for contrast, holds a row lock that PostgreSQL keeps for a frozen
//! client: the second buyer waits until the holder commits, then finds
//! the product sold out. Raced: every strategy whose catalogue entry
//! declares the hazard.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow, buy_in_background, fault, judge, reset};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Hazard, Scenario};
use crate::model::product::Settings;

/// How long the second buyer may take while the holder is frozen: more
/// than the instances' ZooKeeper session (2 s), after which its node is
/// gone.
const SECOND_BUYER_WAITS: Duration = Duration::from_millis(3000);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    // The lab's stop resumes a frozen instance before stopping it, so an
    // early error leaves nothing frozen behind.
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let token = &lab.info.admin_token;
        let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
        let b = Gateway::new(&lab.info.instances[1].url, token, 8)?;
        let frozen = lab.info.instances[0].name.clone();
        let mut rows = Vec::new();
        for (strategy, expect) in ctx.under(Hazard::FrozenHolder) {
            let product = ctx.product();
            // One unit, so two sales are an oversell; 300 ms of work under
            // a 300 ms lease that only a live watchdog keeps alive.
            let settings = Settings {
                work_ms: 300,
                lease_ms: 300,
                ..Settings::default()
            };
            reset(&a, product, strategy, 1, settings).await?;
            let started = Instant::now();
            let holder = buy_in_background(&a, product, "frozen-buyer");
            tokio::time::sleep(Duration::from_millis(100)).await;
            fault(lab, &frozen, Signal::SIGSTOP)?;
            // Well past the lease: the lock is gone while the holder sleeps.
            tokio::time::sleep(Duration::from_millis(900)).await;
            let mut second = buy_in_background(&b, product, "second-buyer");
            // Past the ZooKeeper session too; a buyer queued on a row lock
            // is still waiting when the holder wakes.
            let early = tokio::time::timeout(SECOND_BUYER_WAITS, &mut second)
                .await
                .ok();
            fault(lab, &frozen, Signal::SIGCONT)?;
            let first = holder.await?;
            let second = match early {
                Some(done) => done?,
                None => second.await?,
            };
            let row = ctx
                .scripted_row(&a, product, &[first, second], started)
                .await?;
            rows.push(judge(row, Scenario::FrozenHolder, "", expect));
        }
        Ok(rows)
    })
    .await
}
