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

/// Entries per `XRANGE` page. A writer that fell behind (its link to
/// Redis slowed while the buyers' script kept appending) leaves tens of
/// thousands of entries; read in one reply they take Redis's one thread
/// from the buyers while it is built, and the instance longer than the
/// 500 ms redis-rs gives an answer to parse it (measured: an 18,000-entry
/// backlog after `backend-slowdown`'s slowed Redis link, read in one
/// reply, timed out on a busy machine and the ledger answered 503).
const PAGE: usize = 1_000;

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
    Ok(read_all(conn, stream)
        .await?
        .iter()
        .filter_map(parse_entry)
        .find(|order| order.order_id == order_id))
}

/// Every entry of `stream`, oldest first, a [`PAGE`] per round trip: no
/// reply is large, whatever the backlog. An entry the writer deletes
/// meanwhile is read or not, as with one `XRANGE`.
pub async fn read_all(conn: &mut RedisConn, stream: &str) -> Result<Vec<StreamId>, BackendError> {
    let mut entries = Vec::new();
    let mut from = "-".to_owned();
    loop {
        let page: StreamRangeReply = redis::cmd("XRANGE")
            .arg(stream)
            .arg(&from)
            .arg("+")
            .arg("COUNT")
            .arg(PAGE)
            .query_async(conn)
            .await?;
        let full = page.ids.len() == PAGE;
        if let Some(last) = page.ids.last() {
            // Exclusive start (Redis 6.2): the page after the last entry.
            from = format!("({}", last.id);
        }
        entries.extend(page.ids);
        if !full {
            return Ok(entries);
        }
    }
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
