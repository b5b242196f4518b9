package store_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// checkDef is one rule of the ledgerq schema: a CHECK constraint or a row of
// ledgerq.row_rules, as a CHECK constraint's definition.
type checkDef struct{ table, name, def string }

func schemaChecks(t *testing.T, st *store.Store) []checkDef {
	t.Helper()
	return queryCatalog(t, st, func(row pgx.CollectableRow) (checkDef, error) {
		var c checkDef
		return c, row.Scan(&c.table, &c.name, &c.def)
	}, `
		SELECT cl.relname, c.conname, pg_get_constraintdef(c.oid)
		FROM pg_constraint c
		JOIN pg_class cl ON cl.oid = c.conrelid
		JOIN pg_namespace n ON n.oid = cl.relnamespace AND n.nspname = 'ledgerq'
		WHERE c.contype = 'c'
		UNION ALL
		SELECT table_name, rule_name, 'CHECK (' || expression || ')' FROM ledgerq.row_rules
		ORDER BY 1, 2`)
}

// A hex format rule (an address, a hash) is checked on every insert and on
// every update of its row, whichever columns the update sets. PostgreSQL's
// regular expressions pay for a counted repetition by the count:
// '^0x[0-9a-f]{64}$' took about 12 µs a value here and '{40}' about 4.5 µs,
// against under 1 µs for '^0x[0-9a-f]+$' with the length compared first;
// a pool transaction's three such rules were evaluated on its insert and on
// each of its state changes. So no rule counts hex digits in its regular
// expression: it bounds the length with octet_length and lets the regular
// expression say which characters (each one byte, so octets are digits).
func TestMigrations_HexFormatChecksCountNoDigitsInTheRegex(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	checks := schemaChecks(t, st)
	counted := regexp.MustCompile(`\[0-9a-f\]\{(\d+)`)
	hexRule := regexp.MustCompile(`\((\w+) ~ '\^0x\[0-9a-f\]\+\$'::text\)`)
	var formats int
	for _, c := range checks {
		for _, m := range counted.FindAllStringSubmatch(c.def, -1) {
			if n, _ := strconv.Atoi(m[1]); n >= 20 {
				t.Errorf("%s.%s counts %d hex digits in a regular expression: %s", c.table, c.name, n, c.def)
			}
		}
		for _, m := range hexRule.FindAllStringSubmatch(c.def, -1) {
			formats++
			column := m[1]
			bounded := regexp.MustCompile(`\(octet_length\(` + column + `\) = (42|66)\) AND ` + regexp.QuoteMeta(m[0]))
			if !bounded.MatchString(c.def) {
				t.Errorf("%s.%s checks %s's characters without bounding its length first: %s", c.table, c.name, column, c.def)
			}
		}
	}
	// The checks the rule covers: were this empty, the loop above would
	// pass on nothing.
	require.GreaterOrEqual(t, formats, 20, "hex format rules found in %d checks", len(checks))
}

// The format rules refuse what they refused before they were made cheaper:
// a digit short or over, upper case, a non-hex or multibyte character, no
// 0x, a trailing newline.
func TestPoolTx_HexFormatChecksRefuseEveryMalformedValue(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newPoolFixture(t, st)
	tx := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx
	hash := "0x" + strings.Repeat("ab", 32)
	addr := "0x" + strings.Repeat("cd", 20)
	malformed := func(good string) map[string]string {
		digits := good[2:]
		return map[string]string{
			"a digit short":            good[:len(good)-1],
			"a digit over":             good + "0",
			"upper case":               "0x" + strings.ToUpper(digits),
			"a non-hex character":      good[:len(good)-1] + "g",
			"a multibyte character":    good[:len(good)-1] + "é",
			"a multibyte in its room":  good[:len(good)-2] + "é",
			"no 0x":                    "00" + digits,
			"0X":                       "0X" + digits,
			"a trailing newline":       good + "\n",
			"a newline in its room":    good[:len(good)-1] + "\n",
			"spaces":                   " " + good[:len(good)-1],
			"hex digits only, no 0x":   digits + "00",
			"empty":                    "",
			"0x alone, padded to size": "0x" + strings.Repeat(" ", len(digits)),
		}
	}
	for _, col := range []struct{ column, constraint, good string }{
		{"tx_hash", "pool_txs_tx_hash_format", hash},
		{"sender", "pool_txs_sender_format", addr},
		{"to_address", "pool_txs_to_format", addr},
	} {
		for name, bad := range malformed(col.good) {
			what := fmt.Sprintf("%s %s (%q)", col.column, name, bad)
			err := execUndone(t, st, `UPDATE ledgerq.pool_txs SET `+col.column+` = $2 WHERE tx_hash = $1`, tx.Hash, bad)
			requireCheckViolation(t, err, col.constraint, what)
		}
		// And the well-formed value is taken: the rule refuses the values
		// above for their form, not for the column.
		err := execUndone(t, st, `UPDATE ledgerq.pool_txs SET `+col.column+` = $2 WHERE tx_hash = $1`, tx.Hash, col.good)
		require.NoError(t, err, "%s %s", col.column, col.good)
	}
}

// The tables the lanes write a row per statement check their rules in one
// BEFORE INSERT OR UPDATE trigger written from ledgerq.row_rules, not in
// CHECK constraints: PostgreSQL reads every CHECK of a table back from its
// stored form and prepares it again in each statement that writes the
// table (pool_txs' 19 took about 160 µs of a one-row INSERT). Every rule is
// named in its table's trigger function, and no CHECK is left beside it.
func TestRowRules_EveryRuleIsCheckedByItsTablesTriggerAndNoCheckIsLeft(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	type ruled struct {
		table                     string
		rules, inFunction, checks int
		trigger, oneExpression    bool
	}
	got := queryCatalog(t, st, func(row pgx.CollectableRow) (ruled, error) {
		var r ruled
		return r, row.Scan(&r.table, &r.rules, &r.inFunction, &r.checks, &r.trigger, &r.oneExpression)
	}, `
		SELECT r.table_name, count(*)::int,
		       count(*) FILTER (WHERE strpos(p.prosrc, 'CONSTRAINT = ' || quote_literal(r.rule_name)) > 0)::int,
		       (SELECT count(*) FROM pg_constraint c
		        WHERE c.conrelid = format('ledgerq.%I', r.table_name)::regclass AND c.contype = 'c')::int,
		       EXISTS (SELECT 1 FROM pg_trigger tg
		               WHERE tg.tgrelid = format('ledgerq.%I', r.table_name)::regclass AND tg.tgname = 'row_rules'
		                 AND tg.tgenabled = 'O' AND tg.tgfoid = p.oid
		                 -- ROW (1) | BEFORE (2) | INSERT (4) | UPDATE (16)
		                 AND tg.tgtype & (1 | 2 | 4 | 16) = (1 | 2 | 4 | 16)),
		       -- A row that keeps its rules is let through by one expression
		       -- over NEW's fields, and no column is copied into a variable
		       -- (PL/pgSQL prepares each expression again in every
		       -- transaction).
		       strpos(p.prosrc, 'row_rules_new.') BETWEEN 1 AND strpos(p.prosrc, 'RETURN NEW')
		           AND strpos(p.prosrc, ':= NEW.') = 0
		FROM ledgerq.row_rules r
		LEFT JOIN pg_proc p ON p.proname = r.table_name || '_row_rules'
		     AND p.pronamespace = 'ledgerq'::regnamespace
		GROUP BY r.table_name, p.prosrc, p.oid
		ORDER BY 1`)
	var tables []string
	for _, r := range got {
		tables = append(tables, r.table)
		require.Equal(t, r.rules, r.inFunction, "%s: rules in its trigger function", r.table)
		require.Zero(t, r.checks, "%s: CHECK constraints beside its trigger", r.table)
		require.True(t, r.trigger, "%s: a BEFORE INSERT OR UPDATE row trigger row_rules calling its function", r.table)
		require.True(t, r.oneExpression, "%s: one expression over NEW's fields lets a row through, and no column is copied", r.table)
	}
	require.Subset(t, tables, []string{"pool_txs", "bundles", "bundle_versions", "wallet_tasks", "tx_attempts", "wallet_health", "shards"})
}

// A rule added to ledgerq.row_rules holds once row_rules_apply rewrote its
// table's trigger, and refuses a row as a CHECK constraint does: SQLSTATE
// 23514, its name as the constraint, PostgreSQL's own message. A rule that
// is NULL for a row lets it through, as a CHECK does.
func TestRowRules_ARuleAddedAndAppliedRefusesARowAsACheckWould(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newPoolFixture(t, st)
	_, err := st.DB().Exec(t.Context(), `
		INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
		    ('pool_txs', 'pool_txs_gas_below_a_million', 'gas < 1000000'),
		    ('pool_txs', 'pool_txs_unknown_passes', 'NULL::boolean');
		SELECT ledgerq.row_rules_apply('pool_txs')`)
	require.NoError(t, err)
	f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)) // gas 21000: the NULL rule lets it through
	tx := testfactory.PoolTx(1, 1, 10, 10)
	tx.Gas = 1_000_000
	_, err = f.add(tx)
	requireCheckViolation(t, err, "pool_txs_gas_below_a_million", "gas 1 000 000")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, `new row for relation "pool_txs" violates check constraint "pool_txs_gas_below_a_million"`, pgErr.Message)
	require.Equal(t, "pool_txs_gas_below_a_million", pgErr.ConstraintName)
	require.Equal(t, "pool_txs", pgErr.TableName)
	require.Equal(t, "ledgerq", pgErr.SchemaName)
	require.Contains(t, pgErr.Detail, "Failing row contains (")
}

// The rules mean the same whatever the search_path of the session that
// writes a row or applies them: a session with ledgerq first in its path
// (as a role or a connection string may set it) applies them, and a
// session without ledgerq in its path has a row refused by a rule that
// names one of ledgerq's types, and a good row stored.
func TestRowRules_HoldWhateverTheSearchPath(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newPoolFixture(t, st)
	tx := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx
	_, err := st.DB().Exec(t.Context(), `SET LOCAL search_path = ledgerq, public`)
	require.NoError(t, err)
	_, err = st.DB().Exec(t.Context(), `SELECT ledgerq.row_rules_apply('pool_txs')`)
	require.NoError(t, err, "applying the rules with ledgerq in the search_path")
	_, err = st.DB().Exec(t.Context(), `SET LOCAL search_path = pg_catalog`)
	require.NoError(t, err)
	err = execUndone(t, st, `UPDATE ledgerq.pool_txs SET state = 'dropped' WHERE tx_hash = $1`, tx.Hash)
	requireCheckViolation(t, err, "pool_txs_dropped_iff_reason", "dropped without a reason, search_path pg_catalog")
	require.NoError(t, execUndone(t, st, `UPDATE ledgerq.pool_txs SET state = 'dropped', drop_reason = 'expired' WHERE tx_hash = $1`, tx.Hash))
}
