//! Where a product's stock lives: each Redis counter's key, its cluster
//! slot and the master serving that slot now. Shown by `GET /stock/{id}`
//! so that a person (and the `cluster-spread` scenario) can see a
//! `segmented` product's segments spread over the masters.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::model::product::keys::RedisCell;

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

/// Where `cells` are, and their masters (none for a stock in a database
/// row). One `CLUSTER SLOTS` on a cluster; nothing is asked of one Redis.
pub async fn of(conn: &mut RedisConn, cells: &[RedisCell]) -> Result<Vec<Placed>, BackendError> {
    if cells.is_empty() {
        return Ok(Vec::new());
    }
    let ranges = if conn.is_cluster() {
        slot_ranges(conn).await?
    } else {
        Vec::new()
    };
    Ok(cells
        .iter()
        .map(|cell| {
            let slot = cell.place.slot();
            let master = ranges
                .iter()
                .find(|(from, to, _)| (*from..=*to).contains(&slot))
                .map(|(_, _, addr)| addr.clone());
            Placed {
                key: cell.key.clone(),
                slot,
                master,
            }
        })
        .collect())
}

/// `CLUSTER SLOTS`: each range of slots with its master's `host:port`.
async fn slot_ranges(conn: &mut RedisConn) -> Result<Vec<(u16, u16, String)>, BackendError> {
    let reply: Vec<Vec<redis::Value>> =
        redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
    Ok(reply
        .iter()
        .filter_map(|range| parse_range(range))
        .collect())
}

/// One range of `CLUSTER SLOTS`: from, to, then the master as `[host,
/// port, id, …]`, then the replicas.
fn parse_range(range: &[redis::Value]) -> Option<(u16, u16, String)> {
    let [from, to, redis::Value::Array(master), ..] = range else {
        return None;
    };
    let (host, port): (String, u16) = redis::from_redis_value(redis::Value::Array(
        master.iter().take(2).cloned().collect(),
    ))
    .ok()?;
    Some((
        redis::from_redis_value(from.clone()).ok()?,
        redis::from_redis_value(to.clone()).ok()?,
        format!("{host}:{port}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_slots_range_names_its_master() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let range = [
            Value::Int(0),
            Value::Int(5460),
            Value::Array(vec![
                text("127.0.0.1"),
                Value::Int(30001),
                text("09dbe9720cda62f7865eabc5fd8857c5d2678366"),
                Value::Array(vec![]),
            ]),
            Value::Array(vec![
                text("127.0.0.1"),
                Value::Int(30004),
                text("821d8ca00d7ccf931ed3ffc7e3db0599d2271abf"),
            ]),
        ];
        assert_eq!(
            parse_range(&range),
            Some((0, 5460, "127.0.0.1:30001".to_owned()))
        );
        assert_eq!(parse_range(&range[..2]), None);
    }
}
