package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every single-row read turns pgx.ErrNoRows into ErrNotFound by going
// through one(): no other code of the store may name pgx.ErrNoRows, and
// every generated :one query the store calls is wrapped in one().
func TestStore_ErrNoRowsBecomesErrNotFoundInOnePlaceOnly(t *testing.T) {
	t.Parallel()
	oneQueries := map[string]bool{}
	sqlFiles, err := filepath.Glob("../../queries/*.sql")
	require.NoError(t, err)
	for _, f := range sqlFiles {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^-- name: (\w+) :one\b`).FindAllStringSubmatch(string(src), -1) {
			oneQueries[m[1]] = true
		}
	}
	require.NotEmpty(t, oneQueries, "no :one query found in queries/")
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			parent := ast.Node(nil)
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, n)
			if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name == "one" {
				stack = stack[:len(stack)-1]
				return false // the one place
			}
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "ErrNoRows" {
				t.Errorf("%s: pgx.ErrNoRows used outside one(); wrap the read in one() instead", fset.Position(sel.Pos()))
			}
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && oneQueries[sel.Sel.Name] && !isCallTo(parent, "one") {
					t.Errorf("%s: single-row query %s is not wrapped in one()", fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	require.Positive(t, checked)
}

func isCallTo(n ast.Node, name string) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == name
}
