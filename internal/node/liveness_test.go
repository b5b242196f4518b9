package node_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// A process whose wallet lane claims holds its liveness lock from Start,
// before its loops claim, until Stop has stopped them; a batch-only process
// holds none (it makes no claim that records one).
func TestNode_WalletLaneHoldsALivenessLockFromStartUntilItsLoopsStopped(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	held := func() int {
		t.Helper()
		var n int
		require.NoError(t, db.Store.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.liveness_locks`).Scan(&n))
		return n
	}
	open := func(c node.Config) *node.Node {
		t.Helper()
		c.DatabaseURL = db.URL
		n, err := node.Open(t.Context(), c)
		require.NoError(t, err)
		t.Cleanup(n.Close)
		return n
	}

	batchOnly := node.Defaults()
	batchOnly.API.Enabled = false
	b := open(batchOnly)
	require.NoError(t, b.Start(t.Context()))
	require.Zero(t, held(), "no wallet lane, no liveness lock")
	b.Stop()

	c := walletConfig(t)
	c.API.Enabled = false
	n := open(c)
	require.NoError(t, n.Start(t.Context()))
	require.Equal(t, 1, held(), "held as Start returns")
	n.Stop()
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, 5*time.Millisecond, "Stop releases it")

	require.NoError(t, n.RunOnce(t.Context()))
	require.Equal(t, 1, held(), "a cron run holds it too")
	n.Close()
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, 5*time.Millisecond, "Close releases it")
}
