-- +goose Up
-- The API keeps the keys it looked up in memory for --api-key-cache. A
-- statement that changes keys (a revocation by ledgerq keys revoke, scopes
-- or a revocation written in plain SQL, a delete) notifies ledgerq_api_keys,
-- delivered when it commits, and every process forgets the keys it keeps.

-- +goose StatementBegin
CREATE FUNCTION ledgerq.api_keys_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ledgerq_api_keys', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.api_keys_changed() IS 'Notifies ledgerq_api_keys: the API forgets the keys it keeps in memory (--api-key-cache).';
CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE OR TRUNCATE ON ledgerq.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION ledgerq.api_keys_changed();

-- +goose Down
DROP TRIGGER api_keys_changed ON ledgerq.api_keys;
DROP FUNCTION ledgerq.api_keys_changed();
