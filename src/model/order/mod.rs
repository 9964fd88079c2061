//! Orders: what a sale records, and how Redis-sold orders reach PostgreSQL.
//!
//! Database strategies insert their order in the stock transaction
//! ([`INSERT_SQL`]). Redis strategies append it to the stream
//! its shard's stream ([`crate::model::product::keys::orders`]) in the same atomic step as the stock
//! write; [`writer`] moves the stream into PostgreSQL.

pub mod state;
pub mod stream;

use uuid::Uuid;

/// One sale, as recorded in the stream and in the `orders` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// Time-ordered (v7) so the primary key index grows at its right edge.
    pub order_id: Uuid,
    /// The product sold.
    pub product_id: i64,
    /// The product's reset generation at the time of the sale.
    pub epoch: i64,
    /// The buyer.
    pub user_id: String,
    /// The strategy that sold it.
    pub strategy: String,
    /// The instance that sold it.
    pub served_by: String,
}

/// Stream field names, shared by the writers (Lua ARGV order) and readers.
pub mod fields {
    /// The whole order in one field, as the selling scripts append it:
    /// `order product epoch user strategy served_by`, separated by single
    /// spaces (none of the first five can hold one; the instance's name,
    /// last, takes the rest). One field instead of six: Redis stores and
    /// hands out one string per order and the writer parses one. Entries
    /// of the six fields below (appended before it existed) are still
    /// read.
    pub const LINE: &str = "o";
    /// Order id (UUID text).
    pub const ORDER: &str = "order";
    /// Product id.
    pub const PRODUCT: &str = "product";
    /// Reset generation.
    pub const EPOCH: &str = "epoch";
    /// Buyer.
    pub const USER: &str = "user";
    /// Strategy id.
    pub const STRATEGY: &str = "strategy";
    /// Instance name.
    pub const SERVED_BY: &str = "served_by";
}

/// The `orders` columns an order fills, in the order every statement
/// binds them (a database sale's INSERT, the writer's batch insert). A
/// macro so that the SQL around it can stay a compile-time `concat!`.
macro_rules! order_columns {
    () => {
        "order_id, product_id, epoch, user_id, strategy, served_by"
    };
}
pub(crate) use order_columns;

/// A statement that inserts the order (its columns bound as `$1..$6`)
/// once per row of the CTE `sold` that `$cte` defines: a conditional
/// update and its order in one statement.
macro_rules! insert_if_sold {
    ($cte:literal) => {
        concat!(
            "WITH sold AS (",
            $cte,
            ") INSERT INTO orders (",
            $crate::model::order::order_columns!(),
            ") SELECT $1, $2, $3, $4, $5, $6 FROM sold RETURNING (SELECT stock FROM sold)"
        )
    };
}
pub(crate) use insert_if_sold;

/// The `INSERT` that records one order inside a PostgreSQL transaction
/// (its columns bound as `$1..$6`).
pub const INSERT_SQL: &str = concat!(
    "INSERT INTO orders (",
    order_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6)"
);

impl Order {
    /// The order from its stream line ([`fields::LINE`]).
    pub fn from_line(line: &str) -> Option<Self> {
        let mut parts = line.splitn(6, ' ');
        let mut next = || parts.next().filter(|part| !part.is_empty());
        Some(Self {
            order_id: next()?.parse().ok()?,
            product_id: next()?.parse().ok()?,
            epoch: next()?.parse().ok()?,
            user_id: next()?.to_owned(),
            strategy: next()?.to_owned(),
            served_by: next()?.to_owned(),
        })
    }

    /// The stream fields as Lua ARGV, in the order the selling scripts'
    /// prelude names them (`store::script`, a layer up).
    pub fn stream_args(&self) -> [String; 5] {
        [
            self.order_id.to_string(),
            self.product_id.to_string(),
            self.user_id.clone(),
            self.strategy.clone(),
            self.served_by.clone(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_line_is_read_whole_or_not_at_all() {
        let id = "0190d5f0-0000-7000-8000-000000000001";
        let order = Order::from_line(&format!("{id} 7 2 buyer-1 redis-lua instance a")).unwrap();
        assert_eq!(order.order_id, id.parse::<Uuid>().unwrap());
        assert_eq!((order.product_id, order.epoch), (7, 2));
        assert_eq!(
            (order.user_id.as_str(), order.strategy.as_str()),
            ("buyer-1", "redis-lua")
        );
        // The instance's name, last, keeps its spaces.
        assert_eq!(order.served_by, "instance a");
        assert!(Order::from_line(&format!("{id} 7 2 buyer-1 redis-lua")).is_none());
        assert!(Order::from_line(&format!("{id} 7 2  redis-lua a")).is_none());
        assert!(Order::from_line("not-a-uuid 7 2 b s a").is_none());
    }
}
