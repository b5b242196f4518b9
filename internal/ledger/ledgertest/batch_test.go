package ledgertest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

func TestBatchLedger_ZeroValueAcceptsEveryBatchAndKnowsNone(t *testing.T) {
	t.Parallel()
	var l ledgertest.BatchLedger
	perBatch, err := l.SubmitBatches(t.Context(), []ledger.Batch{{ID: "a"}, {ID: "b"}})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, perBatch)
	got, err := l.BatchStatuses(t.Context(), []string{"a", "z"})
	require.NoError(t, err)
	require.Equal(t, map[string]ledger.BatchStatusResult{
		"a": {Status: ledger.BatchUnknown}, "z": {Status: ledger.BatchUnknown},
	}, got)
}

func TestBatchLedger_AnswersAsScriptedAndRecordsEveryCall(t *testing.T) {
	t.Parallel()
	l := &ledgertest.BatchLedger{}
	refused := ledger.NewError(ledger.Deterministic, "bad", nil)
	l.Submit = func(ids []string) ([]error, error) {
		// The script may ask the ledger back without deadlocking it.
		_, err := l.BatchStatuses(t.Context(), ids)
		require.NoError(t, err)
		if ids[0] == "busy" {
			return nil, ledger.NewError(ledger.Transient, "busy", nil)
		}
		return []error{nil, refused}, nil
	}
	perBatch, err := l.SubmitBatches(t.Context(), []ledger.Batch{{ID: "a"}, {ID: "b"}})
	require.NoError(t, err)
	require.Equal(t, []error{nil, refused}, perBatch)
	_, err = l.SubmitBatches(t.Context(), []ledger.Batch{{ID: "busy"}})
	require.Equal(t, ledger.Transient, ledger.ClassOf(err))
	require.False(t, errors.Is(err, refused))

	l.SetStatus("a", ledger.BatchInvalid, "txn 1 failed")
	got, err := l.BatchStatuses(t.Context(), []string{"a"})
	require.NoError(t, err)
	require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchInvalid, Reason: "txn 1 failed"}, got["a"])

	calls := l.SubmitCalls()
	require.Equal(t, [][]string{{"a", "b"}, {"busy"}}, calls)
	calls[0][0] = "changed"
	require.Equal(t, "a", l.SubmitCalls()[0][0], "SubmitCalls returns a copy")
	require.Equal(t, 3, l.Sent())
}
