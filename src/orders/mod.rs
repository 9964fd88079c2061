//! Orders: what a sale records, and how Redis-sold orders reach PostgreSQL.
//!
//! Database strategies insert their order in the stock transaction
//! ([`INSERT_SQL`]). Redis strategies append it to the stream
//! its shard's stream ([`crate::product::keys::orders`]) in the same atomic step as the stock
//! write; [`writer`] moves the stream into PostgreSQL.

pub mod state;
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

/// The `orders` columns an order fills, in the order every statement
/// binds them ([`Order::bind_insert`], the writer's batch insert). A macro
/// so that the SQL around it can stay a compile-time `concat!`.
macro_rules! order_columns {
    () => {
        "order_id, product_id, epoch, user_id, strategy, served_by"
    };
}
pub(crate) use order_columns;

/// A statement that inserts the order (bound by [`Order::bind_insert`] as
/// `$1..$6`) once per row of the CTE `sold` that `$cte` defines: a
/// conditional update and its order in one statement.
macro_rules! insert_if_sold {
    ($cte:literal) => {
        concat!(
            "WITH sold AS (",
            $cte,
            ") INSERT INTO orders (",
            $crate::orders::order_columns!(),
            ") SELECT $1, $2, $3, $4, $5, $6 FROM sold RETURNING (SELECT stock FROM sold)"
        )
    };
}
pub(crate) use insert_if_sold;

/// The `INSERT` that records one order inside a database strategy's
/// transaction.
pub const INSERT_SQL: &str = concat!(
    "INSERT INTO orders (",
    order_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6)"
);

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
