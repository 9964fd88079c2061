-- An order's life after the sale (products with `pay_within_ms`).
-- `state`: NULL while the order holds its unit (a hold waiting for its
-- payment, or, without `pay_within_ms`, a sold unit); 'paid'; 'expired'
-- (cancelled or overdue: its unit is owed back to the stock); 'returned'
-- (the unit is back on sale). A hold's due time is read off its v7 order
-- id, so the buy path writes nothing new. `paid_at_ms` records a payment
-- even if a naive give-back later marks the order expired: the buyer paid.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS state TEXT;
ALTER TABLE orders ADD COLUMN IF NOT EXISTS paid_at_ms BIGINT;
-- The reaper's range scan, in the order the holds fall due (v7 ids sort
-- by the millisecond they were made); the ledger's counts use its prefix.
CREATE INDEX IF NOT EXISTS orders_product_epoch_id ON orders (product_id, epoch, order_id);
DROP INDEX IF EXISTS orders_product_epoch;
