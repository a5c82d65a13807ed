-- Schema and reporting queries for the order management service.
-- Target: PostgreSQL 14+

/*
 * Customers are soft-deleted: rows keep their history and the
 * deleted_at column records when the account was closed.
 */
CREATE TABLE IF NOT EXISTS customers (
    id          BIGSERIAL PRIMARY KEY,
    email       VARCHAR(255) NOT NULL UNIQUE,
    full_name   TEXT NOT NULL,
    country     CHAR(2) NOT NULL DEFAULT 'US',
    created_at  TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    deleted_at  TIMESTAMP
);

CREATE TABLE IF NOT EXISTS products (
    id          BIGSERIAL PRIMARY KEY,
    sku         VARCHAR(32) NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    active      BOOLEAN NOT NULL DEFAULT TRUE
);

CREATE TABLE IF NOT EXISTS orders (
    id           BIGSERIAL PRIMARY KEY,
    customer_id  BIGINT NOT NULL REFERENCES customers (id),
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    placed_at    TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    shipped_at   TIMESTAMP,
    note         TEXT
);

CREATE TABLE IF NOT EXISTS order_items (
    order_id    BIGINT NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    product_id  BIGINT NOT NULL REFERENCES products (id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    unit_cents  INTEGER NOT NULL,
    PRIMARY KEY (order_id, product_id)
);

CREATE INDEX IF NOT EXISTS idx_orders_customer ON orders (customer_id);
CREATE INDEX IF NOT EXISTS idx_orders_status_placed ON orders (status, placed_at);

-- Seed a few rows for local development.
INSERT INTO customers (email, full_name, country)
VALUES
    ('ada@example.com', 'Ada Lovelace', 'GB'),
    ('grace@example.com', 'Grace Hopper', 'US'),
    ('linus@example.com', 'Linus O''Neil', 'FI');

INSERT INTO products (sku, title, price_cents)
VALUES
    ('KB-001', 'Mechanical keyboard', 12900),
    ('MS-002', 'Wireless mouse', 3900),
    ('MN-003', '27" monitor', 28900);

-- Mark stale pending orders as cancelled.
UPDATE orders
SET status = 'cancelled',
    note = 'auto-cancelled after 30 days'
WHERE status = 'pending'
  AND placed_at < CURRENT_TIMESTAMP - INTERVAL '30 days';

-- Revenue per customer for the current year, most valuable first.
SELECT
    c.id,
    c.full_name,
    c.country,
    COUNT(DISTINCT o.id) AS order_count,
    SUM(oi.quantity * oi.unit_cents) / 100.0 AS revenue
FROM customers AS c
JOIN orders AS o ON o.customer_id = c.id
JOIN order_items AS oi ON oi.order_id = o.id
WHERE c.deleted_at IS NULL
  AND o.status IN ('paid', 'shipped')
  AND o.placed_at >= DATE_TRUNC('year', CURRENT_DATE)
GROUP BY c.id, c.full_name, c.country
HAVING SUM(oi.quantity * oi.unit_cents) > 10000
ORDER BY revenue DESC
LIMIT 50;

-- Monthly sales with a running total.
WITH monthly AS (
    SELECT
        DATE_TRUNC('month', o.placed_at) AS month,
        SUM(oi.quantity * oi.unit_cents) AS cents
    FROM orders o
    JOIN order_items oi ON oi.order_id = o.id
    WHERE o.status <> 'cancelled'
    GROUP BY 1
)
SELECT
    month,
    cents / 100.0 AS revenue,
    SUM(cents) OVER (ORDER BY month) / 100.0 AS running_total
FROM monthly
ORDER BY month;

-- Products that have never been ordered.
SELECT p.sku, p.title
FROM products p
LEFT JOIN order_items oi ON oi.product_id = p.id
WHERE oi.product_id IS NULL
  AND p.active = TRUE
ORDER BY p.sku;

-- Order status breakdown, bucketing rare statuses together.
SELECT
    CASE
        WHEN status IN ('pending', 'paid', 'shipped') THEN status
        ELSE 'other'
    END AS bucket,
    COUNT(*) AS total,
    MIN(placed_at) AS first_seen,
    MAX(placed_at) AS last_seen
FROM orders
GROUP BY 1
ORDER BY total DESC;

-- Customers whose latest order is older than 90 days.
SELECT c.email, latest.last_order
FROM customers c
JOIN (
    SELECT customer_id, MAX(placed_at) AS last_order
    FROM orders
    GROUP BY customer_id
) AS latest ON latest.customer_id = c.id
WHERE latest.last_order < CURRENT_TIMESTAMP - INTERVAL '90 days'
  AND c.deleted_at IS NULL;

DELETE FROM order_items
WHERE order_id IN (SELECT id FROM orders WHERE status = 'cancelled');
