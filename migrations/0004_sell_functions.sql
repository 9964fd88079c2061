-- Selling in one round trip. Each function is called as one statement in
-- autocommit, so the call is its own transaction: the hot row's lock is
-- held for the server-side work and the commit, never across a network
-- round trip. Verdicts use the selling scripts' codes: 1 sold, 2 sold
-- out, 3 reset (the epoch moved on), 4 limit reached.

-- db-atomic with a per-buyer limit: the buyer's count first (its row lock
-- holds only the same buyer's requests), then the conditional decrement.
-- A decrement that finds no stock gives the claimed unit back inside the
-- same transaction, so a refusal never leaves a count behind.
CREATE OR REPLACE FUNCTION seckill_sell_one(
    p_order UUID, p_product BIGINT, p_epoch BIGINT, p_user TEXT,
    p_strategy TEXT, p_served_by TEXT, p_limit INT,
    OUT verdict SMALLINT, OUT stock_left BIGINT)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO buyer_counts (product_id, epoch, user_id, bought)
    VALUES (p_product, p_epoch, p_user, 1)
    ON CONFLICT (product_id, epoch, user_id)
    DO UPDATE SET bought = buyer_counts.bought + 1 WHERE buyer_counts.bought < p_limit;
    IF NOT FOUND THEN
        verdict := 4;
        RETURN;
    END IF;
    UPDATE products SET stock = stock - 1
    WHERE id = p_product AND epoch = p_epoch AND stock > 0
    RETURNING stock INTO stock_left;
    IF NOT FOUND THEN
        UPDATE buyer_counts SET bought = bought - 1
        WHERE product_id = p_product AND epoch = p_epoch AND user_id = p_user;
        verdict := 2;
        RETURN;
    END IF;
    INSERT INTO orders (order_id, product_id, epoch, user_id, strategy, served_by)
    VALUES (p_order, p_product, p_epoch, p_user, p_strategy, p_served_by);
    verdict := 1;
END;
$$;

-- db-group: one transaction for a whole group of buyers of one product.
-- The hot row is locked first, so groups from every instance queue there,
-- and each later statement (a new snapshot under READ COMMITTED) sees the
-- counts every earlier group committed. Then: each buyer's place in
-- arrival order among those the limit allows (a buyer may appear more
-- than once), one decrement by k = min(stock, allowed), the k orders in
-- one INSERT from the arrays, the counts in one upsert. One verdict per
-- buyer, in the arrays' order; `stock_left` is the stock right after the
-- buyer's unit (the unit number a history check holds unique).
CREATE OR REPLACE FUNCTION seckill_sell_group(
    p_product BIGINT, p_epoch BIGINT, p_limit INT,
    p_orders UUID[], p_users TEXT[], p_strategy TEXT, p_served_by TEXT)
RETURNS TABLE (verdict SMALLINT, stock_left BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    v_stock BIGINT;
BEGIN
    SELECT p.stock INTO v_stock FROM products p
    WHERE p.id = p_product AND p.epoch = p_epoch
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 3::SMALLINT, NULL::BIGINT FROM unnest(p_orders);
        RETURN;
    END IF;
    RETURN QUERY
    WITH asked AS (
        SELECT a.order_id, a.user_id, a.n
        FROM unnest(p_orders, p_users) WITH ORDINALITY AS a(order_id, user_id, n)
    ), held AS (
        -- One index probe per buyer (a join may be planned as a scan of
        -- every count of every product), and none without a limit.
        SELECT a.*, CASE WHEN p_limit = 0 THEN 0 ELSE COALESCE((
                   SELECT b.bought FROM buyer_counts b
                   WHERE b.product_id = p_product AND b.epoch = p_epoch
                     AND b.user_id = a.user_id), 0) END AS bought
        FROM asked a
    ), allowed AS (
        SELECT h.*, p_limit = 0
               OR h.bought + row_number() OVER (PARTITION BY h.user_id ORDER BY h.n) <= p_limit AS ok
        FROM held h
    ), placed AS (
        SELECT al.*, CASE WHEN al.ok
                     THEN row_number() OVER (PARTITION BY al.ok ORDER BY al.n) END AS place
        FROM allowed al
    ), decided AS (
        SELECT pl.*,
               CASE WHEN NOT pl.ok THEN 4 WHEN pl.place <= v_stock THEN 1 ELSE 2 END AS code
        FROM placed pl
    ), sold AS (
        SELECT d.order_id, d.user_id FROM decided d WHERE d.code = 1
    ), taken AS (
        UPDATE products SET stock = stock - (SELECT count(*) FROM sold)
        WHERE id = p_product AND EXISTS (SELECT 1 FROM sold)
    ), recorded AS (
        INSERT INTO orders (order_id, product_id, epoch, user_id, strategy, served_by)
        SELECT s.order_id, p_product, p_epoch, s.user_id, p_strategy, p_served_by FROM sold s
    ), counted AS (
        INSERT INTO buyer_counts (product_id, epoch, user_id, bought)
        SELECT p_product, p_epoch, s.user_id, count(*) FROM sold s
        WHERE p_limit > 0 GROUP BY s.user_id
        ON CONFLICT (product_id, epoch, user_id)
        DO UPDATE SET bought = buyer_counts.bought + EXCLUDED.bought
    )
    SELECT d.code::SMALLINT,
           CASE WHEN d.code = 1 THEN v_stock - d.place END
    FROM decided d ORDER BY d.n;
END;
$$;
