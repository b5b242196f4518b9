package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/configuration.md is generated from the settings' declarations: a
// setting added, renamed or given another default or help without running
// make generate leaves it stale.
func TestConfigDocs_TheCommittedFileIsCurrent(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeConfigDocs(&b))
	committed, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	require.True(t, string(committed) == b.String(), "docs/configuration.md is stale: run make generate (or go generate ./cmd/ledgerq)")
}

func TestConfigDocs_ListEverySettingWithItsNamesAndDefault(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeConfigDocs(&b))
	doc := b.String()
	for _, want := range []string{
		"| `api.addr` | `--api-addr`<br>formerly `--http-addr` | `LEDGERQ_API_ADDR`<br>formerly `LEDGERQ_HTTP_ADDR` | `127.0.0.1:8080` |",
		"| `database-url` | `--database-url` | `DATABASE_URL` or `LEDGERQ_DATABASE_URL` | (none) |",
		"| `wallet.webhook-allow-private` | `--wallet-webhook-allow-private`<br>formerly `--webhook-allow-private` |",
		"`false` (dev: `true`)",
		"| `shards.workers` | `--shard-workers` | `LEDGERQ_SHARD_WORKERS` | 16, or the CPUs where more |",
		"| `batch.delay-window` | `--batch-delay-window`<br>formerly `--delay-window` |",
		"## The wallet lane (`wallet`)",
		"`LEDGERQ_WALLET_PASSPHRASE_<NAME>`",
		"ledgerq config check --config FILE",
	} {
		require.Contains(t, doc, want)
	}
	for _, s := range serveSettings() {
		require.Contains(t, doc, "`--"+s+"`", "every setting of serve is listed")
	}
}

// serveSettings are the flags of serve's settings.
func serveSettings() []string {
	var flags []string
	level, file := "info", ""
	cfg := nodeDefaultsForServe()
	for _, s := range nodeRegistry("serve", "", &cfg, serveParts, &level, &file, nil).Settings() {
		flags = append(flags, s.Flag)
	}
	return flags
}
