//! Reading orders back from a Redis order stream: the entry format the
//! buy path appends and the writer drains, and a search for one order that
//! waits there (idempotency's replay and an order's view find it before
//! the writer has moved it into PostgreSQL).

use redis::streams::{StreamId, StreamRangeReply};
use uuid::Uuid;

use super::{Order, fields};
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;

/// Longest order stream a search reads; a longer backlog means the
/// writer is behind, and the one searching is told to come back.
const STREAM_SEARCH_LIMIT: usize = 10_000;

/// The order `order_id` if it waits in `stream`.
pub async fn find_in_stream(
    conn: &mut RedisConn,
    stream: &str,
    order_id: Uuid,
) -> Result<Option<Order>, BackendError> {
    let length: usize = redis::cmd("XLEN").arg(stream).query_async(conn).await?;
    if length > STREAM_SEARCH_LIMIT {
        return Err(BackendError::Unavailable(format!(
            "{length} orders wait in the stream; cannot tell yet"
        )));
    }
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await?;
    Ok(reply
        .ids
        .iter()
        .filter_map(parse_entry)
        .find(|order| order.order_id == order_id))
}

/// Reads an order back from a stream entry, its line or (appended before
/// lines) its six fields; `None` if one is missing.
pub fn parse_entry(entry: &StreamId) -> Option<Order> {
    if let Some(redis::Value::BulkString(line)) = entry.map.get(fields::LINE) {
        return Order::from_line(std::str::from_utf8(line).ok()?);
    }
    let text = |name: &str| entry.get::<String>(name);
    Some(Order {
        order_id: text(fields::ORDER)?.parse::<Uuid>().ok()?,
        product_id: text(fields::PRODUCT)?.parse().ok()?,
        epoch: text(fields::EPOCH)?.parse().ok()?,
        user_id: text(fields::USER)?,
        strategy: text(fields::STRATEGY)?,
        served_by: text(fields::SERVED_BY)?,
    })
}
