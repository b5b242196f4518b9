package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// setupWalletAdmin is setupWallets with a signers.Manager behind the
// wallet routes: keystore files in a directory of their own, main and
// other declared by the configuration. It returns the fixture and the
// name of a keystore file (passphrase "pw") in that directory.
func setupWalletAdmin(t *testing.T) (*walletFixture, string) {
	t.Helper()
	db := testdb.New(t)
	dir := t.TempDir()
	_, path, err := keystore.NewKeystore(dir, "pw", keystore.LightScrypt)
	require.NoError(t, err)
	main, other := newTestWallet(t, "main"), newTestWallet(t, "other")
	reg, err := keystore.NewRegistry(main, other)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	m, err := signers.NewManager(signers.ManagerConfig{
		Store: db.Store, Registry: reg, Clock: clk,
		Opener: signers.NewOpener(signers.Config{KeystoreDir: dir, LookupEnv: func(k string) (string, bool) {
			return "pw", k == keystore.PassphraseEnvAll
		}}, keystore.PassphraseFiles{}, nil),
		Chains:     []signers.Chain{{Name: "main", ID: walletChain}},
		Configured: map[string]signers.Decl{"main": {Name: "main", Backend: "keystore"}, "other": {Name: "other", Backend: "keystore"}},
	})
	require.NoError(t, err)
	cfg := httpapi.DefaultConfig()
	cfg.TaskMaxWait = 20 * time.Second
	mx := metrics.New()
	api := httpapi.New(cfg, httpapi.Deps{Store: db.Store, Wallets: reg, WalletAdmin: m, Clock: clk, Logger: testLogger(t), Metrics: mx, Resolver: testHosts})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &walletFixture{
		apiFixture: &apiFixture{t: t, db: db, url: srv.URL, metrics: mx}, api: api,
		main: main, other: other,
		key: createAPIKey(t, db.Store, "main"), otherKey: createAPIKey(t, db.Store, "other"),
		rows: testfactory.New(t, db.Store, clk),
	}, filepath.Base(path)
}

type walletEntryAnswer struct {
	Wallet, Chain, Address, Backend, Key, Source string
	ChainID                                      int64 `json:"chain_id"`
	Disabled, Loaded                             bool
	LoadError                                    string `json:"load_error"`
	CreatedBy                                    string `json:"created_by"`
}

// A wallet is added, listed, used, disabled and removed at run time by an
// admin key, each step audited; the routes answer what cannot be done with
// the status that says why.
func TestWalletsAdmin_AnAdminAddsUsesDisablesAndRemovesAWallet(t *testing.T) {
	t.Parallel()
	f, file := setupWalletAdmin(t)
	admin := adminKey(t, f.db.Store)

	resp := f.call(http.MethodPost, "/v1/wallets", []byte(`{"name":"hot","backend":"keystore","key":"`+file+`"}`), bearer(admin)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	var added walletEntryAnswer
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &added))
	require.Equal(t, walletEntryAnswer{Wallet: "hot", Chain: "main", ChainID: walletChain, Address: added.Address, Backend: "keystore", Key: file,
		Source: "api", Loaded: true, CreatedBy: "test"}, added)
	require.True(t, common.IsHexAddress(added.Address))
	require.Contains(t, strings.ToLower(file), strings.ToLower(added.Address[2:]), "the keystore file's own address")

	list := f.call(http.MethodGet, "/v1/wallets", nil, bearer(admin)...)
	require.Equal(t, http.StatusOK, list.StatusCode, list.Body)
	var all struct{ Wallets []walletEntryAnswer }
	require.NoError(t, json.Unmarshal([]byte(list.Body), &all))
	var names []string
	for _, w := range all.Wallets {
		names = append(names, w.Wallet+":"+w.Source)
	}
	require.Equal(t, []string{"hot:api", "main:config", "other:config"}, names)

	hotKey := createAPIKey(t, f.db.Store, "hot")
	sent := f.call(http.MethodPost, "/v1/wallets/hot/send-tx?task=true", []byte(txBody("1")), bearer(hotKey)...)
	require.Equal(t, http.StatusAccepted, sent.StatusCode, sent.Body)
	task := decodeTask(t, sent).Task
	require.Equal(t, strings.ToLower(added.Address), task.From)

	resp = f.call(http.MethodDelete, "/v1/wallets/hot", nil, bearer(admin)...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "tasks that have not ended")

	resp = f.call(http.MethodPatch, "/v1/wallets/hot", []byte(`{"disabled":true}`), bearer(admin)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"disabled":true`)
	info := f.call(http.MethodGet, "/v1/wallets/hot", nil, bearer(hotKey)...)
	require.Equal(t, http.StatusOK, info.StatusCode, info.Body)
	require.Contains(t, info.Body, `"disabled":true`, "the wallet says it is disabled")
	refused := f.call(http.MethodPost, "/v1/wallets/hot/send-tx?task=true", []byte(txBody("2")), bearer(hotKey)...)
	require.Equal(t, http.StatusConflict, refused.StatusCode, refused.Body)
	require.Contains(t, refused.Body, "disabled")

	cancel := f.call(http.MethodDelete, "/v1/wallets/hot/tasks/"+task.ID, nil, bearer(hotKey)...)
	require.Equal(t, http.StatusOK, cancel.StatusCode, cancel.Body)
	resp = f.call(http.MethodDelete, "/v1/wallets/hot", nil, bearer(admin)...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodGet, "/v1/wallets/hot", nil, bearer(admin)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)

	records, err := f.db.Store.AuditList(t.Context(), 0, 20)
	require.NoError(t, err)
	var actions []string
	for _, r := range records {
		if r.Target == "wallet/hot" {
			actions = append(actions, r.Action)
		}
	}
	require.Equal(t, []string{"wallet.remove", "wallet.disable", "wallet.add"}, actions)
}

func TestWalletsAdmin_OnlyAnAdminChangesWalletsAndEachKeyListsWhatItSees(t *testing.T) {
	t.Parallel()
	f, file := setupWalletAdmin(t)
	admin := adminKey(t, f.db.Store)
	read := keyWith(t, f.db.Store, store.ScopeRead)
	body := []byte(`{"name":"hot","backend":"keystore","key":"` + file + `"}`)

	for _, key := range []string{read, f.key} {
		resp := f.call(http.MethodPost, "/v1/wallets", body, bearer(key)...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, resp.Body)
		resp = f.call(http.MethodPatch, "/v1/wallets/main", []byte(`{"disabled":true}`), bearer(key)...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, resp.Body)
		resp = f.call(http.MethodDelete, "/v1/wallets/main", nil, bearer(key)...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, resp.Body)
	}
	resp := f.call(http.MethodPost, "/v1/wallets", body, bearer(admin)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)

	names := func(key string) []string {
		list := f.call(http.MethodGet, "/v1/wallets", nil, bearer(key)...)
		require.Equal(t, http.StatusOK, list.StatusCode, list.Body)
		var all struct{ Wallets []walletEntryAnswer }
		require.NoError(t, json.Unmarshal([]byte(list.Body), &all))
		var out []string
		for _, w := range all.Wallets {
			out = append(out, w.Wallet)
		}
		return out
	}
	require.Equal(t, []string{"hot", "main", "other"}, names(read))
	require.Equal(t, []string{"main"}, names(f.key), "a wallet key sees its own")
	resp = f.call(http.MethodGet, "/v1/wallets", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, resp.Body)
}

func TestWalletsAdmin_ADeclarationThatCannotWorkIsRefusedWithWhy(t *testing.T) {
	t.Parallel()
	f, file := setupWalletAdmin(t)
	admin := adminKey(t, f.db.Store)
	for _, c := range []struct {
		body string
		want int
		says string
	}{
		{`{"name":"a","backend":"hsm","key":"k"}`, http.StatusBadRequest, "backend"},
		{`{"name":"a","backend":"keystore","key":"` + file + `","colour":"red"}`, http.StatusBadRequest, "colour"},
		{`{"name":"a","backend":"keystore","key":"../` + file + `"}`, http.StatusBadRequest, "not a path"},
		{`{"name":"a","chain":"mars","backend":"keystore","key":"` + file + `"}`, http.StatusBadRequest, `mars`},
		{`{"name":"a","backend":"keystore","key":"` + file + `","address":"0x12"}`, http.StatusBadRequest, "not a hex address"},
		{`{"name":"a","backend":"keystore","key":"` + file + `","address":"0x00000000000000000000000000000000000000aa"}`, http.StatusUnprocessableEntity, "not of the declared address"},
		{`{"name":"a","backend":"keystore","key":"missing.json"}`, http.StatusUnprocessableEntity, "missing.json"},
		{`{"name":"a","backend":"pkcs11","key":"k"}`, http.StatusUnprocessableEntity, "--wallet-pkcs11-module"},
		{`{"name":"main","backend":"keystore","key":"` + file + `"}`, http.StatusConflict, "declared by the configuration"},
	} {
		resp := f.call(http.MethodPost, "/v1/wallets", []byte(c.body), bearer(admin)...)
		require.Equal(t, c.want, resp.StatusCode, "%s: %s", c.body, resp.Body)
		require.Contains(t, resp.Body, c.says, c.body)
	}
	resp := f.call(http.MethodPost, "/v1/wallets", []byte(`{"name":"a","backend":"keystore","key":"`+file+`"}`), bearer(admin)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodPost, "/v1/wallets", []byte(`{"name":"b","backend":"keystore","key":"`+file+`"}`), bearer(admin)...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodPatch, "/v1/wallets/main", []byte(`{"disabled":true}`), bearer(admin)...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodDelete, "/v1/wallets/ghost", nil, bearer(admin)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
	list, err := f.db.Store.WalletsList(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1, "only the one that worked was stored")
}
