package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

func sample(t *testing.T, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runSawtoothSample(args, &out, &errOut)
	return out.Bytes(), errOut.String(), err
}

func TestSawtoothSample_PrintsAPostV1BatchesBodyOfVerifiableBatches(t *testing.T) {
	t.Parallel()
	out, stderr, err := sample(t, "--service", "orders")
	require.NoError(t, err)
	require.Contains(t, stderr, "a throwaway key")
	var one sampleBatch
	require.NoError(t, json.Unmarshal(out, &one), "%s", out)
	require.Equal(t, "orders", one.ServiceID)
	require.Empty(t, one.CreatedAt, "one batch takes the time it is received")
	payload, err := base64.StdEncoding.DecodeString(one.Payload)
	require.NoError(t, err)
	require.NoError(t, sawtooth.CheckBatchForID(one.ID, payload))

	out, _, err = sample(t, "--service", "orders", "--count", "3")
	require.NoError(t, err)
	var many []sampleBatch
	require.NoError(t, json.Unmarshal(out, &many), "%s", out)
	require.Len(t, many, 3)
	var prev time.Time
	for i, b := range many {
		payload, err := base64.StdEncoding.DecodeString(b.Payload)
		require.NoError(t, err)
		require.NoError(t, sawtooth.CheckBatchForID(b.ID, payload))
		at, err := time.Parse(time.RFC3339Nano, b.CreatedAt)
		require.NoError(t, err)
		require.True(t, at.After(prev), "batch %d: created_at keeps the array's order", i)
		prev = at
	}
}

func TestSawtoothSample_PrintsABatchListSignedWithTheKeyFile(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "alice.priv")
	require.NoError(t, os.WriteFile(key, []byte("2f1e7b7a130d7ba9da0068b3bb0ba1d79e7e77110302c9f746c3c2a63fe40088\n"), 0o600))
	out, stderr, err := sample(t, "--format", "batchlist", "--count", "2", "--key-file", key)
	require.NoError(t, err)
	require.Contains(t, stderr, "the key in "+key)
	batches, err := sawtooth.SplitBatchList(out)
	require.NoError(t, err)
	require.Len(t, batches, 2)
	signers := map[string]bool{}
	for _, p := range batches {
		b, err := sawtooth.ParseAndVerifyBatch(p)
		require.NoError(t, err)
		h, err := sawtooth.DecodeBatchHeader(b)
		require.NoError(t, err)
		signers[h.SignerPublicKey] = true
	}
	require.Len(t, signers, 1)
	out2, _, err := sample(t, "--format", "batchlist", "--key-file", key)
	require.NoError(t, err)
	b, err := sawtooth.SplitBatchList(out2)
	require.NoError(t, err)
	pb, err := sawtooth.ParseBatch(b[0])
	require.NoError(t, err)
	h, err := sawtooth.DecodeBatchHeader(pb)
	require.NoError(t, err)
	require.True(t, signers[h.SignerPublicKey], "the same key file signs with the same key")
}

func TestSawtoothSample_RefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.priv")
	require.NoError(t, os.WriteFile(bad, []byte("not hex"), 0o600))
	for _, args := range [][]string{
		{},                                  // json needs a service
		{"--service", "s", "--count", "0"},  // at least one batch
		{"--service", "s", "--format", "x"}, // json or batchlist
		{"--format", "batchlist", "--service", "s"},
		{"--service", "s", "--key-file", bad},
		{"--service", "s", "--key-file", filepath.Join(t.TempDir(), "missing")},
		{"--service", "s", "extra"},
	} {
		out, _, err := sample(t, args...)
		require.Error(t, err, "%q", args)
		require.Empty(t, out, "%q", args)
	}
}
