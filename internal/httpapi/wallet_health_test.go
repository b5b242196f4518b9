package httpapi_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

func TestWallets_GetWalletShowsItsAddressChainAndHealthOnceItHasRun(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	addr := f.main.Address().Hex()
	resp := f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"wallet":"main","address":"`+addr+`","chain_id":1337,"status":"sending","signer":{"backend":"keystore","state":"unknown"}}`,
		resp.Body, "no health before the wallet's first run, and no signature yet")

	ctx := context.Background()
	require.NoError(t, f.db.Store.WalletHealthObserveNonce(ctx, t0, walletChain, addr, 7, 12))
	_, err := f.db.Store.WalletHealthSetBalance(ctx, t0, walletChain, addr, big.NewInt(5), big.NewInt(100))
	require.NoError(t, err)
	resp = f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var got struct {
		Health struct {
			ChainNonce *int64  `json:"chain_nonce"`
			Balance    *string `json:"balance"`
			Threshold  *string `json:"threshold"`
			Paused     bool    `json:"paused"`
			Resets     int     `json:"resets"`
		} `json:"health"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &got))
	require.NotNil(t, got.Health.ChainNonce)
	require.EqualValues(t, 7, *got.Health.ChainNonce)
	require.NotNil(t, got.Health.Threshold)
	require.Equal(t, "100", *got.Health.Threshold)

	// Another wallet's key gets the same 404 as an unknown wallet.
	resp = f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
}

func TestWallets_ATaskShowsItsBumpsReplacementsAndPriceCap(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	id := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	resp := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...)
	require.NotContains(t, resp.Body, `"bumps"`, "a task never bumped shows no bumps")
	_, err := f.db.Store.Conns().Exec(context.Background(),
		`UPDATE ledgerq.wallet_tasks SET bumps = 2, replacements = 1, price_capped_at = $2 WHERE id = $1`, id, t0)
	require.NoError(t, err)
	resp = f.call(http.MethodGet, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"bumps":2`)
	require.Contains(t, resp.Body, `"replacements":1`)
	require.Contains(t, resp.Body, `"price_capped_at":"`+t0.Format("2006-01-02T15:04:05"))
}

func TestWallets_SendTxTakesTheFirstTransactionsFeesAndRefusesBadOnes(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	body := `{"to":"` + recipient + `","value":"1","max_priority_fee_per_gas":"1000000000","max_fee_per_gas":"0x77359400"}`
	resp := f.sendTx("?task=true", body, "Idempotency-Key", "fees-1")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"max_priority_fee_per_gas":"1000000000"`)
	require.Contains(t, resp.Body, `"max_fee_per_gas":"2000000000"`)
	task := f.onlyTask()
	require.Equal(t, "1000000000", task.Request.TipCap.String())
	// The same key with another tip is another request.
	resp = f.sendTx("?task=true", strings.Replace(body, `"1000000000"`, `"1000000001"`, 1), "Idempotency-Key", "fees-1")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, resp.Body)
	for b, want := range map[string]string{
		`{"to":"` + recipient + `","max_priority_fee_per_gas":"-1"}`:                                 "field max_priority_fee_per_gas",
		`{"to":"` + recipient + `","max_fee_per_gas":"1.5"}`:                                         "field max_fee_per_gas",
		`{"to":"` + recipient + `","max_priority_fee_per_gas":"5","max_fee_per_gas":"4"}`:            "at least max_priority_fee_per_gas",
		`{"to":"` + recipient + `","max_priority_fee_per_gas":"0x1` + strings.Repeat("0", 64) + `"}`: "field max_priority_fee_per_gas",
	} {
		resp := f.sendTx("?task=true", b)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", b, resp.Body)
		require.Contains(t, resp.Body, want, b)
	}
	require.Equal(t, task.ID, f.onlyTask().ID, "a refused request stores nothing")
}

func TestWallets_AWaitingTaskOfAPausedWalletSaysSo(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	id := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	resp := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...)
	require.NotContains(t, resp.Body, "wallet_paused")
	ctx := context.Background()
	addr := f.main.Address().Hex()
	_, err := f.db.Store.WalletHealthSetBalance(ctx, t0, walletChain, addr, big.NewInt(5), big.NewInt(100)) // below: paused
	require.NoError(t, err)
	resp = f.call(http.MethodGet, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...)
	require.Contains(t, resp.Body, `"wallet_paused":true`, resp.Body)
	resp = f.call(http.MethodGet, "/v1/wallets/main/tasks", nil, bearer(f.key)...)
	require.Contains(t, resp.Body, `"wallet_paused":true`, resp.Body)
}

// A wallet's signer state shows in GET /v1/wallets/{wallet}: unknown before
// any signature, ok, then unavailable with its error and since when (the
// wallet's status signer_unavailable, an operator's hold still first), and
// ok again. /readyz names the wallet with its backend and error, and stays
// ready. A state recorded for another backend (the wallet's signer changed
// since) is not this signer's.
func TestWallets_GetWalletAndReadyzShowTheSignersState(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	ctx := context.Background()
	addr := f.main.Address().Hex()
	type answer struct {
		Status string `json:"status"`
		Signer struct {
			Backend string  `json:"backend"`
			State   string  `json:"state"`
			Error   *string `json:"error"`
			Since   *string `json:"since"`
		} `json:"signer"`
	}
	get := func() answer {
		t.Helper()
		resp := f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.key)...)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var a answer
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &a))
		return a
	}
	set := func(at time.Time, backend string, state store.SignerState, msg string) {
		t.Helper()
		_, err := f.db.Store.WalletHealthSetSigner(ctx, store.WalletSignerParams{Now: at, ChainID: walletChain, Sender: addr, Backend: backend, State: state, Error: msg})
		require.NoError(t, err)
	}
	readyz := func() string {
		t.Helper()
		resp := f.get("/readyz")
		require.Equal(t, http.StatusOK, resp.StatusCode, "an unavailable signer leaves the process ready: %s", resp.Body)
		return resp.Body
	}
	require.Equal(t, "unknown", get().Signer.State)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, readyz())

	set(t0, "keystore", store.SignerOK, "")
	a := get()
	require.Equal(t, "sending", a.Status)
	require.Equal(t, "ok", a.Signer.State)
	require.Equal(t, "2026-01-02T03:04:05Z", *a.Signer.Since)
	require.Nil(t, a.Signer.Error)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, readyz())

	later := t0.Add(time.Minute)
	set(later, "keystore", store.SignerUnavailable, "the keystore signer is unavailable: connection refused")
	a = get()
	require.Equal(t, "signer_unavailable", a.Status)
	require.Equal(t, "unavailable", a.Signer.State)
	require.Equal(t, "the keystore signer is unavailable: connection refused", *a.Signer.Error)
	require.Equal(t, "2026-01-02T03:05:05Z", *a.Signer.Since)
	require.JSONEq(t, `{"success":true,"status":"ready","unavailable_signers":[
		{"wallet":"main","backend":"keystore","error":"the keystore signer is unavailable: connection refused","since":"2026-01-02T03:05:05Z"}]}`, readyz())
	require.NotContains(t, readyz(), addr, "no address: /readyz needs no key")

	_, _, err := f.db.Store.WalletHealthHold(ctx, store.WalletHoldParams{Now: later, ChainID: walletChain, Sender: addr, Wallet: "main"})
	require.NoError(t, err)
	require.Equal(t, "paused", get().Status, "an operator's hold is said first")
	require.Equal(t, "unavailable", get().Signer.State)

	set(later.Add(time.Minute), "keystore", store.SignerOK, "")
	require.Equal(t, "ok", get().Signer.State)
	require.Nil(t, get().Signer.Error)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, readyz())

	set(later.Add(2*time.Minute), "pkcs11", store.SignerUnavailable, "the pkcs11 signer is unavailable: no token")
	a = get()
	require.Equal(t, "keystore", a.Signer.Backend)
	require.Equal(t, "unknown", a.Signer.State, "recorded for another backend")
	require.Nil(t, a.Signer.Since)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, readyz())
}
