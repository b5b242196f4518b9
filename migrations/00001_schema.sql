-- +goose Up
-- ledgerq creates the schema before goose runs, because goose keeps its version
-- table in it; the statement is repeated here so that sqlc, which reads these
-- files as the schema, knows it too.
CREATE SCHEMA IF NOT EXISTS ledgerq;
COMMENT ON SCHEMA ledgerq IS 'ledgerq: durable submission queue in front of a ledger. Every table and column carries a comment.';

-- goose's own table. sqlc does not know it (goose creates it), so the comments
-- are set from a DO block, which sqlc does not analyse.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'COMMENT ON TABLE ledgerq.goose_db_version IS ''Applied schema migrations (goose). Change only with ledgerq migrate.''';
    EXECUTE 'COMMENT ON COLUMN ledgerq.goose_db_version.id IS ''Row id.''';
    EXECUTE 'COMMENT ON COLUMN ledgerq.goose_db_version.version_id IS ''Migration version (the file number).''';
    EXECUTE 'COMMENT ON COLUMN ledgerq.goose_db_version.is_applied IS ''True when the migration was applied.''';
    EXECUTE 'COMMENT ON COLUMN ledgerq.goose_db_version.tstamp IS ''When the migration was applied.''';
END
$$;
-- +goose StatementEnd

-- +goose Down
COMMENT ON SCHEMA ledgerq IS NULL;
