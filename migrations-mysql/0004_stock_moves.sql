-- Every write of a product's row counts: as PostgreSQL's 0007_stock_moves.sql.
CREATE TRIGGER IF NOT EXISTS products_moves BEFORE UPDATE ON products
    FOR EACH ROW SET NEW.version = OLD.version + 1;
