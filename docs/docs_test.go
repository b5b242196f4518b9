// Package docs_test keeps the documents in docs/ true to the code: every test a
// document names by its function name exists in the tree, so design.md's table
// from rule to origin to test cannot name a test that was renamed or deleted.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// namedTest matches a test named in a document: a function name in backticks,
// or a name prefix ending in * (`TestBatchRetention_*`: the tests of a kind).
var namedTest = regexp.MustCompile("`(Test[A-Za-z0-9_]*)(\\*?)`")

// testFuncs returns the name of every top-level Test function in the module's
// _test.go files.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				funcs[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the module's tests: %v", err)
	}
	return funcs
}

// missingTests returns the tests doc names that funcs does not hold.
func missingTests(doc string, funcs map[string]bool) []string {
	var missing []string
	for _, m := range namedTest.FindAllStringSubmatch(doc, -1) {
		name, prefix := m[1], m[2] == "*"
		found := funcs[name]
		if prefix {
			for f := range funcs {
				if strings.HasPrefix(f, name) {
					found = true
					break
				}
			}
		}
		if !found && !slices.Contains(missing, m[1]+m[2]) {
			missing = append(missing, m[1]+m[2])
		}
	}
	return missing
}

func TestDocs_EveryTestADocumentNamesExists(t *testing.T) {
	t.Parallel()
	funcs := testFuncs(t, "..")
	if !funcs["TestDocs_EveryTestADocumentNamesExists"] || len(funcs) < 100 {
		t.Fatalf("found %d test functions, not this one among them: the walk missed the tree", len(funcs))
	}
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "README.md"))
	named := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		named += len(namedTest.FindAllString(string(b), -1))
		if missing := missingTests(string(b), funcs); len(missing) > 0 {
			t.Errorf("%s names tests that do not exist:\n%s", doc, strings.Join(missing, "\n"))
		}
	}
	if named < 100 {
		t.Errorf("the documents name %d tests; design.md's table alone names more: the pattern finds nothing", named)
	}
}

func TestDocs_DesignHasOneTableFromRuleToOriginToTest(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	// A rule's tests are listed once, in the table whose header names the
	// rule, its origin and its tests; other sections point to it.
	const header = "| lane | rule | where it comes from | tests |"
	if n := strings.Count(string(b), header); n != 1 {
		t.Fatalf("design.md has %d tables headed %q, want 1", n, header)
	}
	if n := strings.Count(string(b), "| rule | tests"); n != 0 {
		t.Errorf("design.md still has %d per-lane tables of tests besides the one table", n)
	}
}
