// Package migrations holds ledgerq's schema as goose migrations. It is the one
// source of schema truth: the binary embeds these files and sqlc reads them as
// its schema.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
