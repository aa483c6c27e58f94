-- Namespaces of the PostgreSQL store (store.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (%(name)s, %(now)s)
ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = %(name)s

-- name: list_namespaces
SELECT name FROM namespaces ORDER BY name
