-- Products: one row per product; the source of truth for its strategy,
-- settings and the reset generation (`epoch`). `stock` and `version` are the
-- database strategies' own counter; Redis strategies keep theirs in Redis.
CREATE TABLE IF NOT EXISTS products (
    id          BIGINT PRIMARY KEY,
    strategy    TEXT        NOT NULL,
    settings    JSONB       NOT NULL,
    initial     BIGINT      NOT NULL,
    stock       BIGINT      NOT NULL,
    version     BIGINT      NOT NULL DEFAULT 0,
    epoch       BIGINT      NOT NULL DEFAULT 1,
    reset_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Orders: one row per successful buy. `order_id` is the idempotency key of
-- the stream writer (a redelivered stream entry inserts nothing twice).
-- `epoch` ties an order to the reset it belongs to, so a straggler from
-- before a reset is never counted against the new stock.
CREATE TABLE IF NOT EXISTS orders (
    order_id    UUID PRIMARY KEY,
    product_id  BIGINT      NOT NULL,
    epoch       BIGINT      NOT NULL,
    user_id     TEXT        NOT NULL,
    strategy    TEXT        NOT NULL,
    served_by   TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS orders_product_epoch ON orders (product_id, epoch);
