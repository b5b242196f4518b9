package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// sentTask posts a task of main and moves it as the worker would: its
// transaction signed, stored and broadcast.
func (f *walletFixture) sentTask() store.Task {
	f.t.Helper()
	task := f.task(decodeTask(f.t, f.sendTx("?task=true", txBody("1"))).Task.ID)
	a := f.rows.StartTask(task)
	_, err := f.db.Store.AttemptMarkSent(context.Background(), store.AttemptMarkSentParams{Now: t0, ChainID: a.ChainID, TxHashes: []string{a.TxHash}})
	require.NoError(f.t, err)
	return f.task(task.ID)
}

func (f *walletFixture) auditActions() []string {
	f.t.Helper()
	recs, err := f.db.Store.AuditList(context.Background(), 0, 100)
	require.NoError(f.t, err)
	var out []string
	for _, r := range recs {
		out = append(out, r.Action)
	}
	return out
}

// POST …/cancel: a waiting task is cancelled at once (200, as DELETE); an
// executing one is asked to be (202, cancel_requested_at), and the answer
// is the same for a retry; an ended one is 409. Each change is audited.
func TestWallets_CancelOfASentTaskIsRecordedForTheWorkerAndAnEndedTaskIs409(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	cancel := func(id string) httpResult {
		return f.call(http.MethodPost, "/v1/wallets/main/tasks/"+id+"/cancel", nil, bearer(f.key)...)
	}

	waiting := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	resp := cancel(waiting)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	got := decodeTask(t, resp)
	require.Equal(t, "error", got.Task.Status)
	require.True(t, got.Task.Cancelled)
	require.Equal(t, http.StatusOK, cancel(waiting).StatusCode, "a retried cancel of a cancelled task succeeds")

	sent := f.sentTask()
	resp = cancel(sent.ID)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	got = decodeTask(t, resp)
	require.Equal(t, "executing", got.Task.Status, "the chain decides how it ends")
	require.False(t, got.Task.Cancelled)
	var raw struct {
		Task struct {
			CancelRequestedAt string `json:"cancel_requested_at"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &raw))
	require.NotEmpty(t, raw.Task.CancelRequestedAt)
	require.NotNil(t, f.task(sent.ID).CancelRequestedAt)
	require.Equal(t, http.StatusAccepted, cancel(sent.ID).StatusCode)

	done := f.task(decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID)
	f.rows.FinishTask(done)
	resp = cancel(done.ID)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "is done")

	require.Equal(t, http.StatusNotFound, cancel("0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b").StatusCode)
	resp = f.call(http.MethodPost, "/v1/wallets/main/tasks/"+sent.ID+"/cancel", nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another wallet's key learns nothing of this one")
	require.ElementsMatch(t, []string{"task.cancel", "task.cancel"}, f.auditActions(), "the waiting and the executing cancel, once each")
}

// POST …/speed-up: the fees are validated as send-tx's (400), must replace
// the live transaction by geth's rule (409 naming the least), and are
// recorded for the worker (202), audited.
func TestWallets_SpeedUpValidatesTheFeesAndRecordsThemForTheWorker(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	sent := f.sentTask()
	live := testfactory.SignedTx("", 0) // the fees StartTask signs with
	require.Equal(t, "2000000000", live.MaxFeePerGas.String())
	speedUp := func(id, body string) httpResult {
		return f.call(http.MethodPost, "/v1/wallets/main/tasks/"+id+"/speed-up", []byte(body), bearer(f.key)...)
	}
	for _, c := range []struct{ body, want string }{
		{`{"max_fee_per_gas":"3000000000"}`, "field max_priority_fee_per_gas: required"},
		{`{"max_fee_per_gas":"x","max_priority_fee_per_gas":"2"}`, "field max_fee_per_gas: must be a whole number"},
		{`{"max_fee_per_gas":"20000000000000","max_priority_fee_per_gas":"2"}`, "--wallet-max-fee-per-gas"},
		{`{"max_fee_per_gas":"3","max_priority_fee_per_gas":"4"}`, "must be at least max_priority_fee_per_gas"},
		{`{"max_fee_per_gas":"3","max_priority_fee_per_gas":"2","gas":1}`, "gas"},
	} {
		resp := speedUp(sent.ID, c.body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", c.body, resp.Body)
		require.Contains(t, resp.Body, c.want, c.body)
	}
	resp := speedUp(sent.ID, `{"max_fee_per_gas":"2100000000","max_priority_fee_per_gas":"2000000000"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "max_fee_per_gas must be at least 2200000000 and max_priority_fee_per_gas at least 1100000000")
	require.Nil(t, f.task(sent.ID).SpeedUp)

	resp = speedUp(sent.ID, `{"max_fee_per_gas":"2200000000","max_priority_fee_per_gas":"0x4190ab00"}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	var raw struct {
		Task struct {
			SpeedUp struct {
				MaxFee string `json:"max_fee_per_gas"`
				MaxTip string `json:"max_priority_fee_per_gas"`
			} `json:"speed_up"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &raw))
	require.Equal(t, "2200000000", raw.Task.SpeedUp.MaxFee)
	require.Equal(t, "1100000000", raw.Task.SpeedUp.MaxTip)
	require.Equal(t, []string{"task.speed_up"}, f.auditActions())

	waiting := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	resp = speedUp(waiting, `{"max_fee_per_gas":"3000000000","max_priority_fee_per_gas":"2000000000"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "only a task whose transaction was sent can be sped up")
}

// The Hathor status route reports a task cancelled after it was sent as it
// reports one cancelled while waiting: its error state, message cancelled.
func TestWallets_HathorStatusRouteReportsACancelledSentTaskAsItsErrorState(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	seed := func(id string) string {
		t.Helper()
		resp := f.call(http.MethodGet, "/wallet/tasks/send-tx/"+id, nil, append(bearer(f.key), "X-Wallet-ID", "main")...)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		return resp.Body
	}
	waiting := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	require.Equal(t, http.StatusOK, f.call(http.MethodPost, "/v1/wallets/main/tasks/"+waiting+"/cancel", nil, bearer(f.key)...).StatusCode)

	sent := f.sentTask()
	live := f.db.Store
	atts, err := live.AttemptListByTask(context.Background(), sent.ID)
	require.NoError(t, err)
	noop := testfactory.SignedTx(sent.ID, atts[0].Nonce)
	noop.Kind = store.AttemptCancel
	require.NoError(t, live.AttemptBump(context.Background(), store.AttemptBumpParams{Now: t0, ChainID: sent.ChainID, Sender: sent.Sender, Old: atts[0].TxHash, New: noop}))
	_, err = live.AttemptConfirm(context.Background(), store.AttemptConfirmParams{Now: t0, ChainID: sent.ChainID, TxHash: noop.TxHash, Final: true})
	require.NoError(t, err)

	want := `{"success":true,"code":2,"status":"Error","message":"cancelled"}`
	require.Equal(t, want, seed(waiting))
	require.Equal(t, want, seed(sent.ID))

	resp := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+sent.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var view struct {
		Task struct {
			Cancelled bool `json:"cancelled"`
			Attempts  []struct {
				TxHash string `json:"tx_hash"`
				Kind   string `json:"kind"`
			} `json:"attempts"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &view))
	require.True(t, view.Task.Cancelled)
	require.Len(t, view.Task.Attempts, 2)
	require.Empty(t, view.Task.Attempts[0].Kind)
	require.Equal(t, "cancel", view.Task.Attempts[1].Kind, "the no-op is among the attempts, marked")
}
