-- An admin's additions to a live sale (`POST /admin/products/{id}/restock`)
-- of a product whose stock is a PostgreSQL row: each written in the same
-- transaction as the row's `stock + units`, once per addition id. The
-- ledger measures the sale against the reset's stock plus these.
CREATE TABLE IF NOT EXISTS additions (
    product_id  BIGINT NOT NULL,
    epoch       BIGINT NOT NULL,
    addition_id UUID   NOT NULL,
    units       BIGINT NOT NULL CHECK (units > 0),
    PRIMARY KEY (product_id, addition_id)
);
