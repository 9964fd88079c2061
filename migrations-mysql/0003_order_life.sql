-- An order's life after the sale: as PostgreSQL's 0006_order_life.sql.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS state VARCHAR(16) NULL;
ALTER TABLE orders ADD COLUMN IF NOT EXISTS paid_at_ms BIGINT NULL;
CREATE INDEX IF NOT EXISTS orders_product_epoch_id ON orders (product_id, epoch, order_id);
DROP INDEX IF EXISTS orders_product_epoch ON orders;
