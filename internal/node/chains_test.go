package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// One process serves wallets on two chains: each wallet's tasks are signed
// for its own chain and mined on it, none on the other.
func TestWalletChains_OneProcessSendsEachWalletsTasksOnItsOwnChain(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	sa, sb := testfactory.NewSigner(t), testfactory.NewSigner(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "wa", ChainID: 1337, Signer: sa}, keystore.Wallet{ID: "wb", ChainID: 31337, Signer: sb})
	require.NoError(t, err)
	alloc := map[common.Address]*big.Int{}
	for _, s := range []keystore.Signer{sa, sb} {
		alloc[common.Address(s.Address())] = new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))
	}
	chainA := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond, Alloc: alloc})
	chainB := evmsim.New(evmsim.Config{ChainID: 31337, BlockPeriod: 100 * time.Millisecond, Alloc: alloc})

	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Registry = reg
	cfg.Wallet.Chains = wallet.Chains{{Name: "a", ChainID: 1337, Instance: chainA}, {Name: "b", ChainID: 31337, Instance: chainB}}
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.API.TaskMaxWait = 0
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, apiKey, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("wa", "wb")})
	require.NoError(t, err)
	w := &walletAPI{t: t, url: srv.URL, key: apiKey}

	ids := map[string][]string{}
	for i := range 5 {
		for _, name := range []string{"wa", "wb"} {
			body := fmt.Sprintf(`{"to":"0x000000000000000000000000000000000000bEEF","value":"%d"}`, i+1)
			ids[name] = append(ids[name], w.taskAnswer(202, "POST", "/v1/wallets/"+name+"/send-tx?task=true", body).ID)
		}
	}
	for name, chain := range map[string]*evmsim.Ledger{"wa": chainA, "wb": chainB} {
		other := chainB
		if chain == chainB {
			other = chainA
		}
		for _, id := range ids[name] {
			var got apiTask
			require.Eventually(t, func() bool {
				got = w.taskAnswer(200, "GET", "/v1/wallets/"+name+"/tasks/"+id, "")
				return got.Status == "done" || got.Status == "error"
			}, 20*time.Second, 50*time.Millisecond)
			require.Equal(t, "done", got.Status, got.Error)
			r, err := chain.TransactionReceipt(t.Context(), [32]byte(common.HexToHash(got.TxHash)))
			require.NoError(t, err)
			require.True(t, r.Found, "wallet %s's task %s is mined on its own chain", name, id)
			r, err = other.TransactionReceipt(t.Context(), [32]byte(common.HexToHash(got.TxHash)))
			require.NoError(t, err)
			require.False(t, r.Found, "and not on the other")
		}
	}
	statuses := n.ChainStatuses(t.Context())
	require.Len(t, statuses, 2)
	require.Equal(t, "a", statuses[0].Name)
	require.Equal(t, int64(31337), statuses[1].ChainID)
	require.Equal(t, 1, statuses[0].Confirmations, "the depth the lane waits for: a dev chain's default")
}

// A process whose chain's nodes are all down starts, when the chain's id is
// declared, and says which chain is unavailable; its tasks wait.
func TestWalletChains_AProcessWhoseNodesAreAllDownStartsAndSaysWhichChain(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: 8453, Signer: testfactory.NewSigner(t)})
	require.NoError(t, err)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Wallet.Registry = reg
	cfg.Wallet.Chains = wallet.Chains{{Name: "base", ChainID: 8453, Nodes: []string{"http://127.0.0.1:1/", "http://127.0.0.1:2/"}}}
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, apiKey, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("w")})
	require.NoError(t, err)
	w := &walletAPI{t: t, url: srv.URL, key: apiKey}
	task := w.taskAnswer(202, "POST", "/v1/wallets/w/send-tx?task=true", `{"to":"0x000000000000000000000000000000000000bEEF","value":"1"}`)
	require.Eventually(t, func() bool {
		st := n.ChainStatuses(t.Context())
		return len(st) == 1 && st[0].State == "unavailable"
	}, 10*time.Second, 50*time.Millisecond, "the chain is reported unavailable")
	code, body := w.do("GET", "/readyz", "")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `"base"`, "readiness names the unavailable chain")
	require.Equal(t, "waiting", w.taskAnswer(200, "GET", "/v1/wallets/w/tasks/"+task.ID, "").Status, "its task waits")
}
