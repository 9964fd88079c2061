-- Every write of a product's row counts: `version` goes up by one on each
-- UPDATE, whatever the statement says (one that bumps it itself, as
-- db-optimistic's compare-and-set does, lands on the same value).
-- Reconciliation's repair compares it: the stock's value can move and come
-- back (a give-back, then a sale), its version cannot.
CREATE OR REPLACE FUNCTION products_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS products_moves ON products;
CREATE TRIGGER products_moves BEFORE UPDATE ON products
    FOR EACH ROW EXECUTE FUNCTION products_moves();
