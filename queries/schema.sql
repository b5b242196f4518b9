-- name: SchemaEnsure :exec
-- Creates the ledgerq schema before goose runs: goose keeps its version table
-- in it, so it must exist before the first migration.
CREATE SCHEMA IF NOT EXISTS ledgerq;

-- name: SchemaTryLock :one
-- Takes the migration lock for this session if no other session holds it:
-- every ledgerq migrator holds it, on a connection of its own, from before
-- SchemaEnsure until its migrations are done, so processes started together
-- serialise (README). The key is "ledgerq" in ASCII followed by 1; goose's
-- own lock (taken inside, for older binaries) has another key. It never
-- waits in PostgreSQL: a waiting statement holds a snapshot, and CREATE
-- INDEX CONCURRENTLY in a migration waits for every older snapshot, so the
-- lock holder and the waiters would wait for each other where PostgreSQL's
-- deadlock detector cannot see it. Callers poll instead.
SELECT pg_try_advisory_lock(7810759523990401281) AS locked;

-- name: SchemaUnlock :one
-- Releases the migration lock SchemaTryLock took for this session.
SELECT pg_advisory_unlock(7810759523990401281) AS unlocked;

-- name: SchemaVersionTableExists :one
-- Whether goose's version table (@version_table, store.MigrationTable)
-- exists, read without creating it (goose creates it when asked for the
-- version): only a migrator holding the migration lock creates anything in
-- the schema.
SELECT (to_regclass(@version_table::text) IS NOT NULL)::bool AS present;
