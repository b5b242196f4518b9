-- name: SchemaEnsure :exec
-- Creates the ledgerq schema before goose runs: goose keeps its version table
-- in it, so it must exist before the first migration.
CREATE SCHEMA IF NOT EXISTS ledgerq;
