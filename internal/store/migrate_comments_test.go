package store_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

// sourceCitation matches a comment that names a rule by an internal document
// (a numbered source, "the seed's", a design document or one of its sections)
// rather than by what it does. Operators read these comments with \d+ and
// have none of those documents.
var sourceCitation = regexp.MustCompile(`(?i)\bseeds?\b|DESIGN|§`)

func TestMigrations_NoCommentCitesAnInternalDocument(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Every comment on an object of the ledgerq schema, or on the schema
	// itself: tables, views, columns, types, indexes, functions, constraints.
	rows, err := st.DB().Query(ctx, `
		SELECT o.type || ' ' || o.identity, d.description
		FROM pg_description d
		CROSS JOIN LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
		WHERE o.schema = 'ledgerq' OR (o.type = 'schema' AND o.identity = 'ledgerq')
		ORDER BY 1`)
	require.NoError(t, err)
	type comment struct{ object, text string }
	comments, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (comment, error) {
		var c comment
		err := r.Scan(&c.object, &c.text)
		return c, err
	})
	require.NoError(t, err)
	objects := make([]string, 0, len(comments))
	var citing []string
	for _, c := range comments {
		objects = append(objects, c.object)
		if sourceCitation.MatchString(c.text) {
			citing = append(citing, c.object+": "+c.text)
		}
	}
	// Were the query to find nothing (the schema renamed, say), the check
	// below would pass on nothing.
	require.Subset(t, objects, []string{
		"table ledgerq.batches",
		"table column ledgerq.wallet_tasks.status",
		"type ledgerq.batch_status",
		"view ledgerq.batch_overview",
	}, "the check covers tables, columns, types and views")
	require.Empty(t, citing, "comments that cite an internal document instead of saying what the rule is:\n%s", strings.Join(citing, "\n"))
}
