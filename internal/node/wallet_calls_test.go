package node_test

import (
	"context"
	"crypto/ecdsa"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// On a real geth --dev and a real anvil, with TestToken deployed from the
// committed artefacts: an ERC-20 transfer sent through send-tx by signature,
// and one by an ABI fragment, are signed and mined by the wallet lane, end
// done, and move the tokens, as eth_call's balanceOf reads them back.
func TestWalletCalls_ATransferByNameEndsDoneAndMovesTheTokensOnARealNode(t *testing.T) {
	t.Parallel()
	for name, start := range contractNodes() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			signer := testfactory.NewSigner(t)
			holder := common.Address(signer.Address())
			url, client, deployer := start(t, holder)
			supply := new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(1e18))
			token := testcontracts.Deploy(t, client, deployer, testcontracts.TestToken, "Test", "TST", supply)
			testcontracts.Transact(t, client, deployer, testcontracts.TestToken, token, "transfer", holder, big.NewInt(10_000))

			w := startChainWalletAPI(t, signer, url)
			bob := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
			carol := common.HexToAddress("0x00000000000000000000000000000000000ca201")
			bySig := w.send(`{"to":"` + token.Hex() + `","function":"transfer(address,uint256)","args":["` + bob.Hex() + `","1000"]}`)
			byABI := w.send(`{"to":"` + token.Hex() + `","abi":{"type":"function","name":"transfer","stateMutability":"nonpayable",` +
				`"inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[{"name":"","type":"bool"}]},` +
				`"method":"transfer","args":["` + carol.Hex() + `",234]}`)
			// The same call by name through SQL (ledgerq.send_tx), encoded by
			// the database in the caller's transaction.
			dave := common.HexToAddress("0x00000000000000000000000000000000000da4e1")
			_, err := w.st.DB().Exec(t.Context(), `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES (session_user, 'w')`)
			require.NoError(t, err)
			var bySQL string
			require.NoError(t, w.st.DB().QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, function => 'transfer(address,uint256)', args => $2::json)`,
				token.Hex(), `["`+strings.ToLower(dave.Hex())+`", "0x2a"]`).Scan(&bySQL))
			for _, id := range []string{bySig.ID, byABI.ID, bySQL} {
				got := w.ended(id)
				require.Equal(t, "done", got.Status, got.Error)
			}
			require.Equal(t, big.NewInt(42), testcontracts.BalanceOf(t, client, token, dave))
			require.Equal(t, big.NewInt(1000), testcontracts.BalanceOf(t, client, token, bob))
			require.Equal(t, big.NewInt(234), testcontracts.BalanceOf(t, client, token, carol))
			require.Equal(t, big.NewInt(10_000-1000-234-42), testcontracts.BalanceOf(t, client, token, holder))
			code, out := w.do(http.MethodGet, "/v1/wallets/w/tasks/"+byABI.ID, "")
			require.Equal(t, http.StatusOK, code)
			require.Contains(t, out, `"function":"transfer(address,uint256)"`)
			require.Contains(t, out, `"method":"transfer"`)
		})
	}
}

// startChainWalletAPI serves wallet "w" (signer) on the dev chain id through
// the node at url; mutate, when given, changes the configuration first.
func startChainWalletAPI(t *testing.T, signer keystore.Signer, url string, mutate ...func(*node.Config)) *walletAPI {
	t.Helper()
	db := testdb.New(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: testgeth.DevChainID, Signer: signer})
	require.NoError(t, err)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Registry = reg
	cfg.Wallet.Chains = wallet.Chains{{Name: "dev", ChainID: testgeth.DevChainID, Nodes: []string{url}}}
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.Wallet.Shards.Backoff = 100 * time.Millisecond
	cfg.API.TaskMaxWait = 0
	for _, m := range mutate {
		m(&cfg)
	}
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, apiKey, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("w")})
	require.NoError(t, err)
	return &walletAPI{t: t, url: srv.URL, key: apiKey, st: n.Store(), addr: common.Address(signer.Address())}
}

// startContractNode starts a real node for a contract test and returns its
// URL, a client, and a funded key to deploy with; wallet gets 1 ether.
type startContractNode func(t *testing.T, wallet common.Address) (url string, client *ethclient.Client, deployer *ecdsa.PrivateKey)

// contractNodes are the real nodes the contract tests run on: geth --dev and
// anvil, each with the same chain id.
func contractNodes() map[string]startContractNode {
	return map[string]startContractNode{
		"geth": func(t *testing.T, w common.Address) (string, *ethclient.Client, *ecdsa.PrivateKey) {
			n := testgeth.Start(t)
			key, err := crypto.GenerateKey()
			require.NoError(t, err)
			n.Fund(t, crypto.PubkeyToAddress(key.PublicKey), big.NewInt(params.Ether))
			n.Fund(t, w, big.NewInt(params.Ether))
			return n.URL, n.Client(), key
		},
		"anvil": func(t *testing.T, w common.Address) (string, *ethclient.Client, *ecdsa.PrivateKey) {
			n := testanvil.Start(t, testanvil.ChainID(testgeth.DevChainID))
			n.SetBalance(t, w, big.NewInt(params.Ether))
			return n.URL, n.Client(), n.Keys[0]
		},
	}
}
