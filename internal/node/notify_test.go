package node_test

// A loop hears of work another process made for it from PostgreSQL's
// NOTIFY, not from its poll: in these tests the loops poll once an hour.

import (
	"context"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// openServed opens a node on c and serves its API on a test server; both
// are closed at the end of the test.
func openServed(t *testing.T, ctx context.Context, c node.Config) (*node.Node, *httptest.Server) {
	t.Helper()
	n, err := node.Open(ctx, c)
	require.NoError(t, err)
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	return n, srv
}

// startNode opens and starts a node and stops it at the end of the test.
func startNode(t *testing.T, c node.Config) *node.Node {
	t.Helper()
	n, err := node.Open(t.Context(), c)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		n.Stop()
		n.Close()
	})
	return n
}

// The builder lane split over two processes: one takes transactions on
// /rpc and runs no loop, the other runs the queuer, submitter and monitor.
// A transaction sent after both started is cut into a bundle and submitted
// within seconds, though the loops would next poll in an hour.
func TestNotify_TheBuilderLanesLoopsInAnotherProcessWakeForAPoolTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	chain := jam.New(jam.Config{SlotLength: 200 * time.Millisecond, FundDevAccounts: true})
	t.Cleanup(func() { _ = chain.Close() })
	jamSrv := httptest.NewServer(jam.NewHandler(chain))
	t.Cleanup(jamSrv.Close)
	base := node.Defaults()
	base.DatabaseURL = db.URL
	base.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base.Loops.PollInterval = time.Hour
	base.Builder.Enabled = true
	base.Builder.Ledger.URL = jamSrv.URL

	ingress := base
	ingress.Loops.Queuer, ingress.Loops.Submitter, ingress.Loops.Monitor = false, false, false
	in := startNode(t, ingress)
	srv := httptest.NewServer(in.Handler())
	t.Cleanup(srv.Close)
	workers := base
	workers.API.Enabled = false
	w := startNode(t, workers)
	// The loops' first rounds, at start, found nothing; the next poll is an
	// hour away. Wait until the workers listen, so that the notification
	// is heard.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-w.Listener().Connected():
	case <-ctx.Done():
		t.Fatal("the workers' listener did not connect")
	}

	cl, err := ethclient.DialContext(ctx, srv.URL+"/rpc")
	require.NoError(t, err)
	defer cl.Close()
	key := jam.DevAccounts()[0].Key
	id := big.NewInt(base.Builder.Pool.ChainID)
	to := common.Address{0xde, 0xad}
	// The first transaction may still meet the loops' rounds at start; the
	// second comes when they are idle, with no round due for an hour.
	for nonce := range uint64(2) {
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
			ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: 21000, To: &to, Value: big.NewInt(1),
		})
		require.NoError(t, err)
		require.NoError(t, cl.SendTransaction(ctx, tx))
		submitted := chain.Stats().Submitted
		require.Eventually(t, func() bool {
			p, err := w.Store().PoolGet(ctx, id.Int64(), tx.Hash().Hex())
			if err != nil || p.BundleBlock == nil {
				return false
			}
			b, err := w.Store().BundleGet(ctx, id.Int64(), uint64(*p.BundleBlock))
			return err == nil && b.State != store.BundleQueued
		}, 20*time.Second, 20*time.Millisecond, "nonce %d was not cut into a bundle and submitted", nonce)
		// The claim moves the bundle on; the send follows it.
		require.Eventually(t, func() bool { return chain.Stats().Submitted > submitted },
			10*time.Second, 20*time.Millisecond, "the chain received no work package for nonce %d", nonce)
	}
}

// A task's webhook event is delivered at once by the deliverer, which
// would next poll in an hour: the transition that stored the delivery
// notified it.
func TestNotify_TheWebhookDelivererWakesForATasksEvent(t *testing.T) {
	t.Parallel()
	got := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	t.Cleanup(hook.Close)
	api := startWalletAPI(t, func(c *node.Config) {
		c.Wallet.Webhooks.Interval = time.Hour
		c.Wallet.Webhooks.AllowPrivate = true
	})
	code, out := api.do(http.MethodPost, "/v1/wallets/w/webhooks", `{"url":"`+hook.URL+`","event_types":["submitted"]}`)
	require.Equal(t, http.StatusCreated, code, out)
	api.send(`{"to":"0x000000000000000000000000000000000000bEEF","value":"1"}`)
	select {
	case body := <-got:
		require.Contains(t, body, `"type":"task.submitted"`)
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook delivered within 20 s")
	}
}
