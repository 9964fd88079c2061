-- The per-buyer limit of the PostgreSQL strategies: how many units each
-- buyer holds of a product in its current reset. Claimed by an upsert in
-- the same transaction as the stock change, so the check and the record
-- are one step (the row lock serializes one buyer's concurrent requests).
CREATE TABLE IF NOT EXISTS buyer_counts (
    product_id BIGINT NOT NULL,
    epoch      BIGINT NOT NULL,
    user_id    TEXT   NOT NULL,
    bought     INT    NOT NULL,
    PRIMARY KEY (product_id, epoch, user_id)
);
