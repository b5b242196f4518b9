package node_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func builderConfig() node.Config {
	c := node.Defaults()
	c.DatabaseURL = "postgres://unused"
	c.Builder.Enabled = true
	c.Builder.Ledger.URL = "http://127.0.0.1:19800"
	return c
}

// simBuilderConfig is the builder lane on the in-process simulated JAM
// chain (--builder-ledger sim) with slots of 200 ms, on the test's own
// database.
func simBuilderConfig(t *testing.T) node.Config {
	t.Helper()
	c := node.Defaults()
	c.DatabaseURL = testdb.New(t).URL
	c.Loops.PollInterval = 50 * time.Millisecond
	c.Builder.Enabled = true
	c.Builder.Ledger.Kind = builder.LedgerSim
	c.Builder.Ledger.Sim.SlotLength = 200 * time.Millisecond
	return c
}

// signTransfer signs a transfer of 1 wei from key to to, at nonce 0, on
// the builder lane's chain of c.
func signTransfer(t *testing.T, c node.Config, key *ecdsa.PrivateKey, to common.Address) *types.Transaction {
	t.Helper()
	id := big.NewInt(c.Builder.Pool.ChainID)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: 21000, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	return tx
}

func TestBuilderConfig_DefaultsAreValidAndBadSettingsNameTheirFlag(t *testing.T) {
	t.Parallel()
	c := builderConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("the builder lane's defaults: %v", err)
	}
	for _, tc := range []struct {
		flag string
		set  func(*node.Config)
	}{
		{"--builder-ledger-url", func(c *node.Config) { c.Builder.Ledger.URL = "" }},
		{"--builder-ledger-url", func(c *node.Config) { c.Builder.Ledger.URL = "ftp://x" }},
		{"--builder-ledger", func(c *node.Config) { c.Builder.Ledger.Kind = "nope" }},
		{"--builder-chain-id", func(c *node.Config) { c.Builder.Pool.ChainID = 0 }},
		{"--builder-bundle-size", func(c *node.Config) { c.Builder.BundleSize = 0 }},
		{"--builder-cores", func(c *node.Config) { c.Builder.Cores = 0 }},
		{"--builder-bundle-max-versions", func(c *node.Config) { c.Builder.MaxVersions = 0 }},
		{"--builder-submit-window-open", func(c *node.Config) { c.Builder.WindowOpen, c.Builder.WindowClose = time.Second, 2*time.Second }},
		{"--builder-submit-backoff", func(c *node.Config) { c.Builder.SubmitBackoff = 0 }},
		{"--builder-pool-min-tip", func(c *node.Config) { c.Builder.Pool.MinTip = big.NewInt(-1) }},
		{"--builder-pool-max-tx-size", func(c *node.Config) { c.Builder.Pool.MaxTxSize = 1 << 20 }},
		{"--builder-pool-max-pending", func(c *node.Config) { c.Builder.Pool.Limits.MaxPending = 0 }},
		{"--builder-pool-ttl", func(c *node.Config) { c.Builder.Pool.Limits.TTL = 0 }},
	} {
		c := builderConfig()
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("want an error naming %s, got %v", tc.flag, err)
		}
	}
}

// The builder lane on the in-process simulated JAM chain (--builder-ledger
// sim): a transaction sent with ethclient to /rpc ends in a finalized
// bundle.
func TestBuilderLane_SimChainTakesATransactionFromRPCToAFinalizedBundle(t *testing.T) {
	t.Parallel()
	c := simBuilderConfig(t)
	c.Builder.GuaranteeTimeout = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, srv := openServed(t, ctx, c)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	cl, err := ethclient.DialContext(ctx, srv.URL+"/rpc")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	key := jam.DevAccounts()[0].Key // funded on the simulated chain's EVM
	tx := signTransfer(t, c, key, common.Address{0xde, 0xad})
	if err := cl.SendTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := n.Store().PoolGet(ctx, c.Builder.Pool.ChainID, tx.Hash().Hex())
		if err == nil && p.BundleBlock != nil {
			b, err := n.Store().BundleGet(ctx, c.Builder.Pool.ChainID, uint64(*p.BundleBlock))
			if err == nil && b.State == store.BundleFinalized {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the transaction's bundle was not finalized: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Once executed, the chain's nonce is the pool's latest nonce.
	if n, err := cl.NonceAt(ctx, crypto.PubkeyToAddress(key.PublicKey), nil); err != nil || n != 1 {
		t.Fatalf("eth_getTransactionCount latest = %d, %v; want 1", n, err)
	}
}

// A simulated chain that has not executed what the database says it did (a
// fresh chain beside a database that outlived the last one) is refused at
// start: the bundler would cut on a parent the chain never saw.
func TestBuilderLane_ASimChainBehindTheDatabaseIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	c := simBuilderConfig(t)
	c.Builder.Ledger.Sim.Journal = filepath.Join(t.TempDir(), "jam.journal")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Open(ctx, c)
	require.NoError(t, err)
	srv := httptest.NewServer(n.Handler())
	require.NoError(t, n.Start(ctx))
	cl, err := ethclient.DialContext(ctx, srv.URL+"/rpc")
	require.NoError(t, err)
	tx := signTransfer(t, c, jam.DevAccounts()[3].Key, common.Address{1})
	require.NoError(t, cl.SendTransaction(ctx, tx))
	_, err = bind.WaitMined(ctx, cl, tx)
	require.NoError(t, err)
	cl.Close()
	srv.Close()
	n.Stop()
	n.Close()

	// The same journal: the same chain.
	again, err := node.Open(ctx, c)
	require.NoError(t, err)
	again.Close()
	// Another journal: a chain that never executed bundle 1.
	c.Builder.Ledger.Sim.Journal = filepath.Join(t.TempDir(), "other.journal")
	_, err = node.Open(ctx, c)
	require.ErrorContains(t, err, "they are not the same chain")
}
