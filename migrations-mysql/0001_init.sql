-- The `mysql` store (MySQL/InnoDB; the lab runs MariaDB): the stock and
-- the orders of products whose `store` setting is `mysql`. The product's
-- definition (strategy, settings, epoch) stays in PostgreSQL; a reset
-- writes this row with PostgreSQL's epoch, so an order here carries the
-- same reset generation as everywhere else.
CREATE TABLE IF NOT EXISTS products (
    id             BIGINT PRIMARY KEY,
    epoch          BIGINT NOT NULL,
    stock          BIGINT NOT NULL,
    version        BIGINT NOT NULL DEFAULT 0,
    fence          BIGINT NOT NULL DEFAULT 0,
    waves_released INT    NOT NULL DEFAULT 1
) ENGINE = InnoDB;

-- One row per sale, as in PostgreSQL's `orders`; the UUID as its 16 bytes.
CREATE TABLE IF NOT EXISTS orders (
    order_id   BINARY(16)   PRIMARY KEY,
    product_id BIGINT       NOT NULL,
    epoch      BIGINT       NOT NULL,
    user_id    VARCHAR(64)  NOT NULL,
    strategy   VARCHAR(64)  NOT NULL,
    served_by  VARCHAR(255) NOT NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY orders_product_epoch (product_id, epoch)
) ENGINE = InnoDB;

-- The per-buyer limit's counts, claimed in the stock's transaction.
CREATE TABLE IF NOT EXISTS buyer_counts (
    product_id BIGINT      NOT NULL,
    epoch      BIGINT      NOT NULL,
    user_id    VARCHAR(64) NOT NULL,
    bought     INT         NOT NULL,
    PRIMARY KEY (product_id, epoch, user_id)
) ENGINE = InnoDB;

-- `db-lock-table`'s lock rows for products stored here: the lock lives in
-- the database it guards, as the articles' MySQL lock table does.
CREATE TABLE IF NOT EXISTS locks (
    name        VARCHAR(191) PRIMARY KEY,
    owner       CHAR(36)     NOT NULL,
    lease_ms    BIGINT       NOT NULL,
    acquired_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB;
