-- Fencing: the newest fencing token that has touched a product's row. A
-- write carrying an older token is refused (the `fenced` strategy guarding
-- a PostgreSQL row).
ALTER TABLE products ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0;

-- The lock table of `db-lock-table`: a row is a held lock. The unique name
-- makes the INSERT the acquisition; rows older than their lease are stale
-- (a crashed holder's) and may be taken over.
CREATE TABLE IF NOT EXISTS locks (
    name        TEXT PRIMARY KEY,
    owner       TEXT        NOT NULL,
    lease_ms    BIGINT      NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
