package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
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

// testHosts is the tests' DNS: a fixed table, and any other name does not
// resolve.
var testHosts = hostTable{
	"hooks.example":    {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	"a":                {"93.184.215.14"},
	"internal.example": {"10.0.0.7"},
	"metadata.example": {"169.254.169.254"},
	"rebind.example":   {"93.184.215.14", "127.0.0.1"},
	"localhost":        {"127.0.0.1", "::1"},
}

type hostTable map[string][]string

func (h hostTable) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := h[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

func (f *walletFixture) webhookCount() int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.db.Store.Conns().QueryRow(context.Background(), `SELECT count(*) FROM ledgerq.webhook_endpoints`).Scan(&n))
	return n
}

func TestWebhooks_CreateRefusesTargetsInsideTheNetworkAndMalformedURLs(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	for url, want := range map[string]string{
		"http://169.254.169.254/latest/meta-data/": "link-local",
		"http://127.0.0.1:8080/hook":               "loopback",
		"http://[::1]/hook":                        "loopback",
		"http://[::ffff:127.0.0.1]/hook":           "loopback",
		"http://10.0.0.1/hook":                     "private",
		"http://172.16.5.4/hook":                   "private",
		"http://192.168.1.1/hook":                  "private",
		"http://[fd00::1]/hook":                    "unique local",
		"http://[fe80::1]/hook":                    "link-local",
		"http://100.64.0.1/hook":                   "carrier-grade NAT",
		"http://0.0.0.0/hook":                      "this network",
		"http://224.0.0.1/hook":                    "multicast",
		"http://255.255.255.255/hook":              "broadcast",
		"http://[64:ff9b::a9fe:a9fe]/hook":         "link-local",
		"http://[2002:c0a8:101::1]/hook":           "private",
		"http://localhost:9000/hook":               "loopback",
		"http://internal.example/hook":             "private",
		"http://metadata.example/hook":             "link-local",
		"http://rebind.example/hook":               "loopback",
		"http://nowhere.example/hook":              "does not resolve",
		"https://:80/":                             "no host",
		"https://hooks.example:99999/":             "port",
		"https://hooks.example:0/":                 "port",
		"https://hooks.example:/":                  "port",
		"https://hooks.example/a#section":          "fragment",
		"gopher://hooks.example/":                  "http or https",
		"http://user:hunter2@127.0.0.1/":           "loopback",
	} {
		body, err := json.Marshal(map[string]string{"url": url})
		require.NoError(t, err)
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", body, bearer(f.key)...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", url, resp.Body)
		require.Contains(t, resp.Body, "field url", url)
		require.Contains(t, resp.Body, want, url)
		require.NotContains(t, resp.Body, "hunter2", "a refusal does not repeat a password")
	}
	require.Equal(t, 0, f.webhookCount(), "nothing stored")
}

func TestWebhooks_AllowPrivateTakesLoopbackReceivers(t *testing.T) {
	t.Parallel()
	f := setupWallets(t, func(c *httpapi.Config) { c.Webhooks.AllowPrivate = true })
	for _, url := range []string{"http://127.0.0.1:8080/hook", "http://localhost:9000/hook", "http://[::1]:9/hook", "http://10.0.0.1/hook"} {
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"`+url+`"}`), bearer(f.key)...)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", url, resp.Body)
	}
	// Still refused: what no delivery could reach.
	for url, want := range map[string]string{
		"https://:80/":                "no host",
		"http://127.0.0.1:99999/":     "port",
		"http://nowhere.example/hook": "does not resolve",
	} {
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"`+url+`"}`), bearer(f.key)...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", url, resp.Body)
		require.Contains(t, resp.Body, want, url)
	}
}

// The webhook routes decode JSON as strictly as every other route: a key
// given twice, a key that matches a field only when case is ignored and an
// unknown key are each a 400 naming it, and nothing is stored.
func TestWebhooks_CreateRefusesRepeatedWrongCaseAndUnknownKeys(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	for body, want := range map[string]string{
		`{"url":"https://hooks.example/a","url":"https://hooks.example/b"}`:   "field url: given more than once",
		`{"URL":"https://hooks.example/a"}`:                                   "URL",
		`{"url":"https://hooks.example/a","Secret":"x"}`:                      "Secret",
		`{"url":"https://hooks.example/a","event_types":[],"event_types":[]}`: "field event_types: given more than once",
		`{"url":"https://hooks.example/a","colour":"red"}`:                    "unknown field",
	} {
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(body), bearer(f.key)...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, resp.Body)
		require.Contains(t, resp.Body, want, body)
	}
	require.Equal(t, 0, f.webhookCount(), "nothing stored")
}

// A URL's password is sent to the endpoint (basic authentication) but never
// shown: the create answer and the list show it as xxxxx.
func TestWebhooks_PasswordInTheURLIsNeverShown(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hook:hunter2@hooks.example/a?x=1"}`), bearer(f.key)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	require.NotContains(t, resp.Body, "hunter2")
	var created webhookAnswer
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &created))
	require.Equal(t, "https://hook:xxxxx@hooks.example/a?x=1", created.URL)

	resp = f.call(http.MethodGet, "/v1/wallets/main/webhooks", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.NotContains(t, resp.Body, "hunter2")
	require.Contains(t, resp.Body, "https://hook:xxxxx@hooks.example/a?x=1")

	list, err := f.db.Store.WebhookEndpointList(context.Background(), "main")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "https://hook:hunter2@hooks.example/a?x=1", list[0].URL, "the stored URL keeps it, for delivery")
}

func TestWebhooks_AWalletHasAtMostMaxEndpoints(t *testing.T) {
	t.Parallel()
	f := setupWallets(t, func(c *httpapi.Config) { c.Webhooks.MaxEndpoints = 2 })
	for i := range 2 {
		resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", fmt.Appendf(nil, `{"url":"https://hooks.example/%d"}`, i), bearer(f.key)...)
		require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	}
	resp := f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hooks.example/3"}`), bearer(f.key)...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "2 webhook endpoints")

	// Another wallet has its own count; a deleted endpoint frees its place.
	resp = f.call(http.MethodPost, "/v1/wallets/other/webhooks", []byte(`{"url":"https://hooks.example/o"}`), bearer(f.otherKey)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	list, err := f.db.Store.WebhookEndpointList(context.Background(), "main")
	require.NoError(t, err)
	resp = f.call(http.MethodDelete, "/v1/wallets/main/webhooks/"+list[0].ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, resp.Body)
	resp = f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hooks.example/3"}`), bearer(f.key)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
}

// Concurrent registrations cannot pass the cap together: the count and the
// insert are serialised per wallet.
func TestWebhooks_ConcurrentCreatesNeverExceedTheCap(t *testing.T) {
	t.Parallel()
	const max, tries = 5, 40
	f := setupWallets(t, func(c *httpapi.Config) { c.Webhooks.MaxEndpoints = max })
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
	)
	for i := range tries {
		wg.Go(func() {
			resp := do(t, f.request(context.Background(), http.MethodPost, "/v1/wallets/main/webhooks",
				fmt.Appendf(nil, `{"url":"https://hooks.example/%d"}`, i), bearer(f.key)...))
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusCreated: max, http.StatusConflict: tries - max}, codes)
	require.Equal(t, max, f.webhookCount())
}
