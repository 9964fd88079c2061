-- Selling in one round trip, as PostgreSQL's seckill_sell_one: called as
-- `SELECT seckill_sell_one(...)` in autocommit, the function runs inside
-- that one statement, so its writes commit (or roll back) together and
-- the hot row's lock is held for the server-side work and the commit,
-- never across a network round trip. (A procedure would need CALL with
-- multiple result sets; a function returns one value.)
--
-- The buyer's count first (its row lock holds only the same buyer's
-- requests), then the conditional decrement; with p_version >= 0 only if
-- nobody wrote since that version was read (db-optimistic's
-- compare-and-set). Returns the stock left (>= 0) when sold; -2 when no
-- row matched (sold out, reset, or the version moved on); -4 when the
-- buyer is at the limit. A refusal gives the claimed unit back.
DROP FUNCTION IF EXISTS seckill_sell_one;
CREATE FUNCTION seckill_sell_one(
    p_order BINARY(16), p_product BIGINT, p_epoch BIGINT, p_user VARCHAR(64),
    p_strategy VARCHAR(64), p_served_by VARCHAR(255), p_limit INT, p_version BIGINT)
RETURNS BIGINT
NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
    DECLARE v_bought INT;
    DECLARE v_left BIGINT;
    IF p_limit > 0 THEN
        INSERT INTO buyer_counts (product_id, epoch, user_id, bought)
        VALUES (p_product, p_epoch, p_user, 1)
        ON DUPLICATE KEY UPDATE bought = bought + 1;
        SELECT bought INTO v_bought FROM buyer_counts
        WHERE product_id = p_product AND epoch = p_epoch AND user_id = p_user;
        IF v_bought > p_limit THEN
            UPDATE buyer_counts SET bought = bought - 1
            WHERE product_id = p_product AND epoch = p_epoch AND user_id = p_user;
            RETURN -4;
        END IF;
    END IF;
    UPDATE products SET stock = stock - 1, version = version + 1
    WHERE id = p_product AND epoch = p_epoch AND stock > 0
      AND (p_version < 0 OR version = p_version);
    IF ROW_COUNT() = 0 THEN
        IF p_limit > 0 THEN
            UPDATE buyer_counts SET bought = bought - 1
            WHERE product_id = p_product AND epoch = p_epoch AND user_id = p_user;
        END IF;
        RETURN -2;
    END IF;
    SELECT stock INTO v_left FROM products WHERE id = p_product;
    INSERT INTO orders (order_id, product_id, epoch, user_id, strategy, served_by)
    VALUES (p_order, p_product, p_epoch, p_user, p_strategy, p_served_by);
    RETURN v_left;
END
