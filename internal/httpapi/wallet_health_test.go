package httpapi_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWallets_GetWalletShowsItsAddressChainAndHealthOnceItHasRun(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	addr := f.main.Address().Hex()
	resp := f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"wallet":"main","address":"`+addr+`","chain_id":1337}`, resp.Body, "no health before the wallet's first run")

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
