package node_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// The webhook endpoint settings reach the API's registration: with
// --wallet-webhook-allow-private a loopback receiver is taken, and
// --wallet-webhook-max-endpoints caps a wallet's endpoints; by default a loopback
// receiver is refused.
func TestWalletLane_WebhookEndpointSettingsReachTheAPI(t *testing.T) {
	t.Parallel()
	register := func(t *testing.T, mutate func(*node.Config)) []int {
		t.Helper()
		c := walletConfig(t)
		c.DatabaseURL = testdb.New(t).URL
		mutate(&c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, srv := openServed(t, ctx, c)
		_, token, err := n.Store().APIKeyCreate(ctx, store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("w")})
		if err != nil {
			t.Fatal(err)
		}
		var codes []int
		for _, path := range []string{"/a", "/b"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/wallets/w/webhooks",
				strings.NewReader(`{"url":"http://127.0.0.1:9`+path+`"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("%s: %d %s", path, resp.StatusCode, body)
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	got := register(t, func(c *node.Config) {
		c.Wallet.Webhooks.AllowPrivate = true
		c.API.Webhooks.MaxEndpoints = 1
	})
	if got[0] != http.StatusCreated || got[1] != http.StatusConflict {
		t.Errorf("allowed private, at most 1: answers %v, want [201 409]", got)
	}
	got = register(t, func(*node.Config) {})
	if got[0] != http.StatusBadRequest || got[1] != http.StatusBadRequest {
		t.Errorf("defaults: answers %v, want [400 400]", got)
	}
}
