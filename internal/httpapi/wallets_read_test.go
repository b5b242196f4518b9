package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

// A key with read opens every read route of every wallet, as docs/access.md
// and the API description say, and no write route of any: 403, naming the
// scope it needs. A key scoped to another wallet still gets 404 for this
// one, as for a wallet that does not exist.
func TestWalletsAccess_AReadKeyReadsEveryWalletAndWritesNone(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	task := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	hook := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hooks.example/a"}`), bearer(f.key)...)
	require.Equal(t, http.StatusCreated, hook.StatusCode, hook.Body)
	var created webhookAnswer
	require.NoError(t, json.Unmarshal([]byte(hook.Body), &created))
	hookID := created.ID
	read := keyWith(t, f.db.Store, store.ScopeRead)

	for _, c := range []struct {
		method, path, body string
		headers            []string
		want               int
	}{
		{http.MethodGet, "/v1/wallets/main", "", nil, http.StatusOK},
		{http.MethodGet, "/v1/wallets/other", "", nil, http.StatusOK},
		{http.MethodGet, "/v1/wallets/main/tasks", "", nil, http.StatusOK},
		{http.MethodGet, "/v1/wallets/main/tasks/" + task, "", nil, http.StatusOK},
		{http.MethodGet, "/wallet/tasks/send-tx/" + task, "", []string{"X-Wallet-ID", "main"}, http.StatusOK},
		{http.MethodGet, "/v1/wallets/main/webhooks", "", nil, http.StatusOK},
		{http.MethodGet, "/v1/wallets/ghost", "", nil, http.StatusNotFound},
		{http.MethodPost, "/v1/wallets/main/send-tx", txBody("1"), nil, http.StatusForbidden},
		{http.MethodDelete, "/v1/wallets/main/tasks/" + task, "", nil, http.StatusForbidden},
		{http.MethodPost, "/v1/wallets/main/tasks/" + task + "/cancel", "", nil, http.StatusForbidden},
		{http.MethodPost, "/v1/wallets/main/tasks/" + task + "/speed-up", `{"max_fee_per_gas":"3","max_priority_fee_per_gas":"2"}`, nil, http.StatusForbidden},
		{http.MethodPost, "/v1/wallets/main/pause", "", nil, http.StatusForbidden},
		{http.MethodPost, "/v1/wallets/main/resume", "", nil, http.StatusForbidden},
		{http.MethodPost, "/v1/wallets/main/webhooks", `{"url":"https://hooks.example/b"}`, nil, http.StatusForbidden},
		{http.MethodDelete, "/v1/wallets/main/webhooks/" + hookID, "", nil, http.StatusForbidden},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		resp := f.call(c.method, c.path, body, append(bearer(read), c.headers...)...)
		require.Equal(t, c.want, resp.StatusCode, "%s %s: %s", c.method, c.path, resp.Body)
		if c.want == http.StatusForbidden {
			require.Contains(t, resp.Body, "forbidden: key", "%s %s: the message says what the key has and needs", c.method, c.path)
		}
	}
	require.Equal(t, store.TaskWaiting, f.task(task).Status, "the read key changed nothing")

	// Another wallet's key still learns nothing of this one.
	resp := f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
}
