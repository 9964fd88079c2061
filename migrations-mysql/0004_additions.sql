-- An admin's additions to a live sale of a product whose stock is a MySQL
-- row: each written in the same transaction as the row's `stock + units`,
-- once per addition id (see PostgreSQL's migration 0008).
CREATE TABLE IF NOT EXISTS additions (
    product_id  BIGINT     NOT NULL,
    epoch       BIGINT     NOT NULL,
    addition_id BINARY(16) NOT NULL,
    units       BIGINT     NOT NULL,
    PRIMARY KEY (product_id, addition_id)
) ENGINE = InnoDB;
