//! Orders: what a sale records, and how Redis-sold orders reach PostgreSQL.
//!
//! Database strategies insert their order in the stock transaction
//! ([`insert_sql`]). Redis strategies append it to the stream
//! [`crate::product::keys::ORDERS`] in the same atomic step as the stock
//! write; [`writer`] moves the stream into PostgreSQL.

pub mod writer;

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

/// The `INSERT` that records one order inside a database strategy's
/// transaction; the same column order as the writer's batch insert.
pub const INSERT_SQL: &str = "INSERT INTO orders (order_id, product_id, epoch, user_id, strategy, served_by) \
     VALUES ($1, $2, $3, $4, $5, $6)";

impl Order {
    /// Binds this order to [`INSERT_SQL`]'s parameters.
    pub fn bind_insert<'q>(
        &'q self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(self.order_id)
            .bind(self.product_id)
            .bind(self.epoch)
            .bind(&self.user_id)
            .bind(&self.strategy)
            .bind(&self.served_by)
    }

    /// The stream fields as Lua ARGV, in the order the scripts' `XADD`
    /// expects them after their own leading arguments.
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

/// The Lua fragment that appends an order; expects the epoch in `ARGV[1]`
/// and [`Order::stream_args`] in `ARGV[base]..ARGV[base+4]`. Shared by every
/// script that sells, so the stream's shape is written once.
pub fn lua_xadd(stream_key: &str, base: usize) -> String {
    format!(
        "redis.call('XADD', {stream_key}, '*', '{o}', ARGV[{b0}], '{p}', ARGV[{b1}], '{e}', ARGV[1], '{u}', ARGV[{b2}], '{s}', ARGV[{b3}], '{sb}', ARGV[{b4}])",
        o = fields::ORDER,
        p = fields::PRODUCT,
        e = fields::EPOCH,
        u = fields::USER,
        s = fields::STRATEGY,
        sb = fields::SERVED_BY,
        b0 = base,
        b1 = base + 1,
        b2 = base + 2,
        b3 = base + 3,
        b4 = base + 4,
    )
}
