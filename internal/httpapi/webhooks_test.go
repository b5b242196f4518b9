package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type webhookAnswer struct {
	ID         string   `json:"id"`
	Wallet     string   `json:"wallet"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Enabled    bool     `json:"enabled"`
	Secret     *string  `json:"secret"`
}

func TestWebhooks_CreateShowsTheSecretOnceListHidesItDeleteRemoves(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hooks.example/a","event_types":["confirmed","failed"]}`), bearer(f.key)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	var created webhookAnswer
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &created))
	require.Equal(t, "main", created.Wallet)
	require.ElementsMatch(t, []string{"confirmed", "failed"}, created.EventTypes)
	require.NotNil(t, created.Secret)
	require.True(t, strings.HasPrefix(*created.Secret, "whsec_"), *created.Secret)

	resp = f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"http://hooks.example/b"}`), bearer(f.key)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)

	resp = f.call(http.MethodGet, "/v1/wallets/main/webhooks", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.NotContains(t, resp.Body, "whsec_", "a list never shows a secret")
	var list struct{ Webhooks []webhookAnswer }
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &list))
	require.Len(t, list.Webhooks, 2, "a wallet may have several endpoints")
	for _, w := range list.Webhooks {
		require.Nil(t, w.Secret)
		if w.URL == "http://hooks.example/b" {
			require.Len(t, w.EventTypes, 5, "no event_types subscribes to all five")
		}
	}

	// Another wallet's key sees none of them and cannot delete them.
	resp = f.call(http.MethodDelete, "/v1/wallets/other/webhooks/"+created.ID, nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodDelete, "/v1/wallets/main/webhooks/"+created.ID, nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)

	resp = f.call(http.MethodDelete, "/v1/wallets/main/webhooks/"+created.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodDelete, "/v1/wallets/main/webhooks/"+created.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodGet, "/v1/wallets/main/webhooks", nil, bearer(f.key)...)
	require.NotContains(t, resp.Body, created.ID)
}

func TestWebhooks_CreateRefusesABadRequestFieldByFieldAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	for body, want := range map[string]string{
		`{}`:                              "field url",
		`{"url":"hooks.example/a"}`:       "field url",
		`{"url":"ftp://hooks.example/a"}`: "field url",
		`{"url":"https://"}`:              "field url",
		`{"url":"https://a/\u0000"}`:      "field url",
		`{"url":"https://a/` + strings.Repeat("x", 2100) + `"}`: "longer than 2048",
		`{"url":"https://a/","event_types":["mined"]}`:          "field event_types",
		`{"url":"https://a/","secret":"hunter2"}`:               "field secret",
		`{"url":"https://a/","secret":"whsec_AAAA"}`:            "field secret",
		`{"url":"https://a/","extra":1}`:                        "unknown field",
	} {
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(body), bearer(f.key)...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, resp.Body)
		require.Contains(t, resp.Body, want, body)
	}
	resp := f.call(http.MethodGet, "/v1/wallets/main/webhooks", nil, bearer(f.key)...)
	require.JSONEq(t, `{"webhooks":[]}`, resp.Body)
}
