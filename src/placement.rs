//! Where a product's stock lives: each Redis counter's key, its cluster
//! slot and the master serving that slot now. Shown by `GET /stock/{id}`
//! so that a person (and the `cluster-spread` scenario) can see a
//! `segmented` product's segments spread over the masters.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::backends::conn::RedisConn;
use crate::error::BackendError;
use crate::strategy::StockLayout;

/// One stock counter and where it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Placed {
    /// The Redis key.
    pub key: String,
    /// Its Redis Cluster hash slot (also computed on one Redis, where it
    /// decides nothing).
    pub slot: u16,
    /// The `host:port` of the master serving the slot, on a cluster.
    pub master: Option<String>,
}

/// The counters of `layout` and their masters (none for a PostgreSQL
/// stock). One `CLUSTER SLOTS` on a cluster; nothing is asked of one
/// Redis.
pub async fn of(conn: &mut RedisConn, layout: StockLayout) -> Result<Vec<Placed>, BackendError> {
    let StockLayout::Redis(cells) = layout else {
        return Ok(Vec::new());
    };
    let ranges = if conn.is_cluster() {
        slot_ranges(conn).await?
    } else {
        Vec::new()
    };
    Ok(cells
        .into_iter()
        .map(|cell| {
            let slot = cell.place.slot();
            let master = ranges
                .iter()
                .find(|(from, to, _)| (*from..=*to).contains(&slot))
                .map(|(_, _, addr)| addr.clone());
            Placed {
                key: cell.key,
                slot,
                master,
            }
        })
        .collect())
}

/// `CLUSTER SLOTS`: each range of slots with its master's `host:port`.
async fn slot_ranges(conn: &mut RedisConn) -> Result<Vec<(u16, u16, String)>, BackendError> {
    type Range = (u16, u16, (String, u16));
    let reply: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
    Ok(reply
        .into_iter()
        .filter_map(|range| {
            // Each range: from, to, master [host, port, id…], replicas….
            let redis::Value::Array(parts) = range else {
                return None;
            };
            let head = redis::Value::Array(parts.into_iter().take(3).collect());
            let (from, to, master): Range = redis::from_redis_value(head).ok()?;
            Some((from, to, format!("{}:{}", master.0, master.1)))
        })
        .collect())
}
