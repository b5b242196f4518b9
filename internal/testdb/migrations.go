package testdb

import (
	"cmp"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ledgerq/ledgerq/migrations"
)

// Migration is one migration file the binary embeds.
type Migration struct {
	File    string
	Version int64 // goose's version: the file name's leading number
}

// Migrations lists the migrations the binary embeds, oldest first.
func Migrations(tb testing.TB) []Migration {
	tb.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatal("no migration is embedded")
	}
	var out []Migration
	for _, f := range files {
		digits, _, ok := strings.Cut(f, "_")
		if !ok {
			tb.Fatalf("migration %s has no version prefix", f)
		}
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			tb.Fatalf("migration %s: %v", f, err)
		}
		out = append(out, Migration{File: f, Version: v})
	}
	slices.SortFunc(out, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	return out
}
