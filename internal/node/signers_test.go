//go:build cgo

package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// A wallet whose key is in an HSM, declared in the configuration
// (--wallet-signer), and one added at run time through POST /v1/wallets:
// both sign with the token and their tasks are mined. A declared wallet
// whose key has another address than the declared one stops the start.
func TestWalletSigners_HSMWalletsDeclaredAndAddedAtRunTimeSendTheirTasks(t *testing.T) {
	tok := softhsmtest.New(t, "ledgerq-node")
	tok.NewKey(t, "secp256k1", "cfg", []byte{1})
	tok.NewKey(t, "secp256k1", "rt", []byte{2})
	pinFile := filepath.Join(t.TempDir(), "pin")
	require.NoError(t, os.WriteFile(pinFile, []byte(tok.PIN+"\n"), 0o600))
	addrs := map[string]common.Address{}
	alloc := map[common.Address]*big.Int{}
	for _, label := range []string{"cfg", "rt"} {
		s, err := pkcs11.Open(t.Context(), pkcs11.Config{Module: tok.Module, Token: tok.Label, Label: label, PIN: tok.PIN})
		require.NoError(t, err)
		addrs[label] = common.Address(s.Address())
		alloc[addrs[label]] = new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))
		s.Close()
	}
	chain := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond, Alloc: alloc})

	db := testdb.New(t)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Chains = wallet.Chains{{Name: "main", ChainID: 1337, Instance: chain}}
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.Wallet.Signers.PKCS11Module, cfg.Wallet.Signers.PKCS11Token, cfg.Wallet.Signers.PKCS11PINFile = tok.Module, tok.Label, pinFile
	cfg.API.TaskMaxWait = 0

	wrong := cfg
	wrong.Wallet.Signers.Wallets = signers.Decls{{Name: "hsm", Backend: "pkcs11", Key: "cfg", Address: addrs["rt"]}}
	_, err := node.Open(t.Context(), wrong)
	require.ErrorContains(t, err, "refusing", "a declared key of another address stops the start")

	cfg.Wallet.Signers.Wallets = signers.Decls{{Name: "hsm", Backend: "pkcs11", Key: "cfg", Address: addrs["cfg"]}}
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, admin, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "ops", Scopes: []store.Scope{store.ScopeAdmin}})
	require.NoError(t, err)
	w := &walletAPI{t: t, url: srv.URL, key: admin}
	code, body := w.do("POST", "/v1/wallets", `{"name":"added","backend":"pkcs11","key":"rt"}`)
	require.Equal(t, 201, code, body)
	require.Contains(t, body, addrs["rt"].Hex())

	code, list := w.do("GET", "/v1/wallets", "")
	require.Equal(t, 200, code, list)
	require.Contains(t, list, `{"wallet":"added","chain":"main","chain_id":1337,"address":"`+addrs["rt"].Hex()+`","backend":"pkcs11","key":"rt","source":"api"`)
	require.Contains(t, list, `{"wallet":"hsm","chain":"main","chain_id":1337,"address":"`+addrs["cfg"].Hex()+`","backend":"pkcs11","key":"cfg","source":"config"`)

	for _, name := range []string{"hsm", "added"} {
		task := w.taskAnswer(202, "POST", "/v1/wallets/"+name+"/send-tx?task=true", `{"to":"0x000000000000000000000000000000000000bEEF","value":"7"}`)
		var got apiTask
		require.Eventually(t, func() bool {
			got = w.taskAnswer(200, "GET", "/v1/wallets/"+name+"/tasks/"+task.ID, "")
			return got.Status == "done" || got.Status == "error"
		}, 20*time.Second, 50*time.Millisecond)
		require.Equal(t, "done", got.Status, got.Error)
		r, err := chain.TransactionReceipt(t.Context(), [32]byte(common.HexToHash(got.TxHash)))
		require.NoError(t, err)
		require.True(t, r.Found, "wallet %s's transaction is on the chain", name)
		code, info := w.do("GET", "/v1/wallets/"+name, "")
		require.Equal(t, 200, code, info)
		require.Contains(t, info, `"backend":"pkcs11","state":"ok"`, fmt.Sprintf("wallet %s signed with the HSM", name))
	}
}
