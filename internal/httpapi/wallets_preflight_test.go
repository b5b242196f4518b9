package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// "preflight": false is stored on the task and shown; left out, the task
// preflights. It is part of the idempotency fingerprint (a replay that
// changes it is another request, 422) while a request without it keeps its
// fingerprint; a value that is not a boolean is a 400 naming the field.
// The task's revert and logs, once recorded, are in the task's answer, its
// list's and a waiting send-tx's.
func TestWallets_SendTxTakesPreflightAndTheTaskShowsItsRevertAndLogs(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	body := `{"to":"` + recipient + `","data":"0xcafe","preflight":false}`
	resp := f.sendTx("?task=true", body, "Idempotency-Key", "no-preflight")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	var a struct {
		Task struct {
			ID        string          `json:"id"`
			Preflight *bool           `json:"preflight"`
			Revert    json.RawMessage `json:"revert"`
			Logs      json.RawMessage `json:"logs"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &a))
	require.NotNil(t, a.Task.Preflight)
	require.False(t, *a.Task.Preflight)
	require.True(t, f.task(a.Task.ID).Request.SkipPreflight)

	byDefault := f.sendTx("?task=true", `{"to":"`+recipient+`","data":"0xcafe"}`)
	require.Equal(t, http.StatusAccepted, byDefault.StatusCode, byDefault.Body)
	require.Contains(t, byDefault.Body, `"preflight":true`)
	require.False(t, f.task(decodeTask(t, byDefault).Task.ID).Request.SkipPreflight)

	replay := f.sendTx("?task=true", `{"to":"`+recipient+`","data":"0xcafe"}`, "Idempotency-Key", "no-preflight")
	require.Equal(t, http.StatusUnprocessableEntity, replay.StatusCode, replay.Body)
	same := f.sendTx("?task=true", body, "Idempotency-Key", "no-preflight")
	require.Equal(t, http.StatusAccepted, same.StatusCode, same.Body)

	bad := f.sendTx("?task=true", `{"to":"`+recipient+`","preflight":"no"}`)
	require.Equal(t, http.StatusBadRequest, bad.StatusCode, bad.Body)
	require.Contains(t, bad.Body, "preflight")

	revert := `{"kind":"error","message":"nope","selector":"0x08c379a0","data":"0x08c379a0"}`
	logs := `{"logs":[{"index":0,"address":"0x00000000000000000000000000000000000000aa","topics":[],"data":"0x"}],"count":1}`
	_, err := f.db.Store.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_tasks SET revert = $1, logs = $2 WHERE id = $3`, revert, logs, a.Task.ID)
	require.NoError(t, err)
	type shown struct {
		ID     string          `json:"id"`
		Revert json.RawMessage `json:"revert"`
		Logs   json.RawMessage `json:"logs"`
	}
	one := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+a.Task.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, one.StatusCode, one.Body)
	var got struct{ Task shown }
	require.NoError(t, json.Unmarshal([]byte(one.Body), &got))
	list := f.call(http.MethodGet, "/v1/wallets/main/tasks", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, list.StatusCode, list.Body)
	var page struct{ Tasks []shown }
	require.NoError(t, json.Unmarshal([]byte(list.Body), &page))
	require.Len(t, page.Tasks, 2)
	seen := 0
	for _, task := range append(page.Tasks, got.Task) {
		if task.ID == a.Task.ID {
			seen++
			require.JSONEq(t, revert, string(task.Revert))
			require.JSONEq(t, logs, string(task.Logs))
		} else {
			require.Empty(t, task.Revert)
		}
	}
	require.Equal(t, 2, seen, "the task is in its list and read alone")

	// A size the table refuses is refused.
	_, err = f.db.Store.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_tasks SET revert = jsonb_build_object('kind', 'raw', 'data', repeat('ab', 200000)) WHERE id = $1`, a.Task.ID)
	require.ErrorContains(t, err, "wallet_tasks_revert_size")
}
