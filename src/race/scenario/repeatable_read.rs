//! `repeatable-read`: the same transactions on PostgreSQL and on MySQL's
//! InnoDB, both at REPEATABLE READ (InnoDB's default), with 100 ms of work
//! inside each so that every buyer's transaction overlaps another's.
//!
//! Derived from the mechanisms before measuring: PostgreSQL's snapshot
//! refuses a write to a row committed since (40001) and the buyer retries,
//! so every row there sells exactly the stock; InnoDB writes on top of the
//! newer row, so a read-then-write transaction (`db-transaction`) loses
//! updates and oversells, while the strategies that lock the row or
//! decrement in the database (`db-pessimistic`, `db-atomic`) or check a
//! version (`db-optimistic`) sell exactly the stock there too. Raced: every
//! strategy whose catalogue entry declares the hazard, once per database;
//! the declared outcome is InnoDB's.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::{Settings, StoreKind};

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        // Retries enough for 20 buyers to take 5 units one commit at a
        // time, where a database makes them retry.
        let settings = Settings {
            work_ms: 100,
            max_retries: 100,
            ..Settings::default()
        };
        let mut rows = Vec::new();
        for (strategy, on_innodb) in ctx.under(Hazard::RepeatableRead) {
            for (store, expect, variant) in [
                (StoreKind::Postgres, Expect::SellsAll, "store=postgres"),
                (StoreKind::Mysql, on_innodb, "store=mysql"),
            ] {
                let case = Case::new(Scenario::RepeatableRead, strategy, 5, 20, expect)
                    .variant(variant)
                    .settings(Settings {
                        store: Some(store),
                        ..settings
                    });
                rows.push(ctx.race(&gateway, case).await?);
            }
        }
        Ok(rows)
    })
    .await
}
