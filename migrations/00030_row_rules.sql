-- +goose Up
-- The rules of the tables the lanes write one row at a time move from CHECK
-- constraints to one BEFORE INSERT OR UPDATE trigger per table, which
-- evaluates the same expressions and refuses a row as the constraint did
-- (SQLSTATE 23514, the constraint's name, the same message).
--
-- Why: PostgreSQL 15 reads every CHECK constraint of a table back from its
-- stored form and prepares it again in each statement that writes the
-- table. pool_txs' 19 took about 160 µs of a 280 µs one-row INSERT
-- (pgbench, prepared, 3 interleaved rounds: 0.28 ms with them, 0.10 ms
-- without, 0.12 ms with a trigger); the lanes write these tables a row per
-- statement, several times in each transaction's or task's life. A
-- PL/pgSQL function is compiled once per connection; it prepares its
-- expressions again in each transaction, so the trigger tests a row in one.
--
-- The rules are rows of ledgerq.row_rules, so they can still be read (and
-- changed) with SQL; row_rules_apply(table) writes the table's trigger
-- function from them.
--
-- Every name in the rules and the functions is written with its schema
-- (search_path pg_catalog while they are written), so they mean the same
-- whatever the search_path of the session that writes a row.
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE TABLE ledgerq.row_rules (
    table_name text NOT NULL,
    rule_name  text NOT NULL,
    expression text NOT NULL,
    PRIMARY KEY (table_name, rule_name),
    CONSTRAINT row_rules_rule_name_not_empty CHECK (rule_name <> '')
);
COMMENT ON TABLE ledgerq.row_rules IS 'Rules a row of a ledgerq table must satisfy, checked on every insert and update by the table''s row_rules trigger (ledgerq.row_rules_apply writes it). A row that breaks a rule is refused as by a CHECK constraint: SQLSTATE 23514, naming rule_name as the constraint. After changing a table''s rules, run SELECT ledgerq.row_rules_apply(''<table>''); it does not check the rows already stored.';
COMMENT ON COLUMN ledgerq.row_rules.table_name IS 'Table in schema ledgerq.';
COMMENT ON COLUMN ledgerq.row_rules.rule_name IS 'The rule''s name, given as the constraint of the error that refuses a row.';
COMMENT ON COLUMN ledgerq.row_rules.expression IS 'A boolean SQL expression over the row''s columns, by name; the row is refused when it is false (NULL passes, as in a CHECK constraint).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.row_rules_apply(tab text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $apply$
DECLARE
    fast text := 'true';
    body text := '';
    def  text;
    m    text[];
    rule record;
BEGIN
    -- Each rule is written over NEW's fields, qualified by PostgreSQL
    -- itself: it deparses the rule as the column of a view over the table
    -- under the alias row_rules_new, which the function declares as an alias
    -- of NEW. A row that keeps every rule (nearly all) costs one expression:
    -- PL/pgSQL prepares each expression it evaluates again in every
    -- transaction. Only a row that breaks one goes through the rules one by
    -- one, to name it.
    FOR rule IN SELECT r.rule_name, r.expression FROM ledgerq.row_rules r WHERE r.table_name = tab ORDER BY r.rule_name LOOP
        EXECUTE format('CREATE TEMP VIEW row_rules_deparse AS SELECT (%s) AS rule FROM ledgerq.%I AS row_rules_new',
            rule.expression, tab);
        def := pg_get_viewdef('row_rules_deparse'::regclass, false);
        DROP VIEW row_rules_deparse;
        m := regexp_match(def, '^\s*SELECT\s+(.*)\s+AS rule\s+FROM (\S+) row_rules_new;?\s*$');
        IF m IS NULL OR m[2] <> format('ledgerq.%I', tab) THEN
            RAISE EXCEPTION 'row_rules_apply: rule % of % does not deparse as expected: %', rule.rule_name, tab, def;
        END IF;
        fast := fast || format(E'\n        AND (%s) IS NOT FALSE', m[1]);
        body := body || format(
            E'    IF (%s) IS FALSE THEN\n'
            || E'        RAISE EXCEPTION USING ERRCODE = ''check_violation'', SCHEMA = ''ledgerq'', TABLE = %L, CONSTRAINT = %L,\n'
            || E'            MESSAGE = %L, DETAIL = ''Failing row contains '' || left(NEW::text, 512) || ''.'';\n'
            || E'    END IF;\n',
            m[1], tab, rule.rule_name,
            format('new row for relation "%s" violates check constraint "%s"', tab, rule.rule_name));
    END LOOP;
    EXECUTE format(
        E'CREATE OR REPLACE FUNCTION ledgerq.%I() RETURNS trigger LANGUAGE plpgsql AS $rules$\nDECLARE\n'
        || E'    row_rules_new ALIAS FOR NEW;\nBEGIN\n'
        || E'    IF %s THEN\n        RETURN NEW;\n    END IF;\n%s    RETURN NEW;\nEND\n$rules$',
        tab || '_row_rules', fast, body);
    EXECUTE format('COMMENT ON FUNCTION ledgerq.%I() IS %L', tab || '_row_rules',
        format('The rules of ledgerq.row_rules for %s, written by ledgerq.row_rules_apply: do not edit.', tab));
    EXECUTE format('DROP TRIGGER IF EXISTS row_rules ON ledgerq.%I', tab);
    EXECUTE format('CREATE TRIGGER row_rules BEFORE INSERT OR UPDATE ON ledgerq.%I FOR EACH ROW EXECUTE FUNCTION ledgerq.%I()',
        tab, tab || '_row_rules');
END
$apply$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.row_rules_apply(text) IS 'Writes the table''s row_rules trigger and its function from ledgerq.row_rules. It does not check the rows already stored.';

-- The tables: those a lane writes one row per statement.
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression)
SELECT cl.relname, c.conname, pg_get_expr(c.conbin, c.conrelid)
FROM pg_constraint c
JOIN pg_class cl ON cl.oid = c.conrelid
WHERE c.contype = 'c' AND cl.relnamespace = 'ledgerq'::regnamespace
  AND cl.relname IN ('pool_txs', 'bundles', 'bundle_versions', 'wallet_tasks', 'tx_attempts', 'wallet_health', 'shards');

-- +goose StatementBegin
DO $move$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT table_name, rule_name FROM ledgerq.row_rules ORDER BY 1, 2 LOOP
        EXECUTE format('ALTER TABLE ledgerq.%I DROP CONSTRAINT %I', r.table_name, r.rule_name);
    END LOOP;
    FOR r IN SELECT DISTINCT table_name FROM ledgerq.row_rules ORDER BY 1 LOOP
        PERFORM ledgerq.row_rules_apply(r.table_name);
    END LOOP;
END
$move$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $back$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT table_name FROM ledgerq.row_rules ORDER BY 1 LOOP
        EXECUTE format('DROP TRIGGER row_rules ON ledgerq.%I', r.table_name);
        EXECUTE format('DROP FUNCTION ledgerq.%I()', r.table_name || '_row_rules');
    END LOOP;
    FOR r IN SELECT table_name, rule_name, expression FROM ledgerq.row_rules ORDER BY 1, 2 LOOP
        EXECUTE format('ALTER TABLE ledgerq.%I ADD CONSTRAINT %I CHECK (%s)', r.table_name, r.rule_name, r.expression);
    END LOOP;
END
$back$;
-- +goose StatementEnd
DROP FUNCTION ledgerq.row_rules_apply(text);
DROP TABLE ledgerq.row_rules;
