package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// TestWalletsAPI_HostileInputNeverAnswers5xx is
// TestBatchesAPI_HostileInputNeverAnswers5xx for the wallet routes: paths,
// query strings, headers (keys, Idempotency-Key, X-Wallet-ID) and bodies
// made of pieces that break APIs, mixed at random from a fixed seed, with
// valid keys often enough to reach the handlers. No answer may be a 5xx,
// and every refusal is the API's JSON error.
func TestWalletsAPI_HostileInputNeverAnswers5xx(t *testing.T) {
	t.Parallel()
	h, pieces := hostileWalletHandler(t)
	r := rand.New(rand.NewPCG(9, 1))
	for range 1200 {
		req := hostileWalletRequest(r, pieces)
		requireNoFaultAnswer(t, h, req, false, fmt.Sprintf("%s %.300q %v", req.Method, req.URL.RequestURI(), req.Header))
	}
}

type hostilePieces struct {
	keys, taskIDs []string
}

// hostileWalletHandler is the API with wallets main and other, a key for
// each and a revoked one, and tasks of main in every status. Waiting
// send-tx requests wait 5 ms at most: the recorder never disconnects.
func hostileWalletHandler(t *testing.T) (http.Handler, hostilePieces) {
	t.Helper()
	db := testdb.New(t)
	cfg := httpapi.DefaultConfig()
	cfg.MaxBodyBytes = 256 << 10
	cfg.TaskMaxWait = 5 * time.Millisecond
	main, other := newTestWallet(t, "main"), newTestWallet(t, "other")
	reg, err := keystore.NewRegistry(main, other)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	api := httpapi.New(cfg, httpapi.Deps{Store: db.Store, Wallets: reg, Clock: clk, Logger: testLogger(t), Metrics: metrics.New()})

	p := hostilePieces{keys: []string{createAPIKey(t, db.Store, "main"), createAPIKey(t, db.Store, "other", "main")}}
	revoked, token, err := db.Store.APIKeyCreate(context.Background(), store.APIKeyCreateParams{Now: t0, Name: "revoked", Scopes: store.WalletScopes("main")})
	require.NoError(t, err)
	_, _, err = db.Store.APIKeyRevoke(context.Background(), store.APIKeyRevokeParams{Now: t0, ID: revoked.ID})
	require.NoError(t, err)
	p.keys = append(p.keys, token)

	rows := testfactory.New(t, db.Store, clk)
	for i := range 4 {
		task := rows.PostTask(testfactory.Task{ChainID: main.ChainID, Sender: main.Address().Hex(), Request: store.TaskRequest{To: recipient}})
		switch i {
		case 1:
			rows.StartTask(task)
		case 2:
			rows.FinishTask(task)
		case 3:
			_, err := db.Store.TaskFail(context.Background(), store.TaskFailParams{Now: t0, ID: task.ID, Reason: "\"quoted\" <reason> \u2028"})
			require.NoError(t, err)
		}
		p.taskIDs = append(p.taskIDs, task.ID)
	}
	return api.Handler(), p
}

var hostileValues = []string{
	`"0"`, `"1"`, `"0x"`, `"0x0"`, `"0xff"`, `"-1"`, `"1e3"`, `" 1"`, `"1 "`, `"0x-1"`, `"+1"`, `"1_000"`,
	`"115792089237316195423570985008687907853269984665640564039457584007913129639935"`,
	`"115792089237316195423570985008687907853269984665640564039457584007913129639936"`,
	`1`, `-1`, `1e999`, `null`, `true`, `[]`, `{}`, `"\u0000"`, `"١"`,
}

var hostileNumbers = []string{"0", "1", "-1", "21000", "9223372036854775807", "9223372036854775808", "18446744073709551616",
	"2147483647", "2147483648", "-2147483649", "1.5", "1e3", "1e999", `"21000"`, "null", "[]", "true"}

func hostileWalletRequest(r *rand.Rand, p hostilePieces) *http.Request {
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	esc := func(s string) string {
		if r.IntN(2) == 0 {
			return url.PathEscape(s)
		}
		return url.QueryEscape(s)
	}
	text := func() string { return pick(hostileText) }
	walletName := func() string {
		switch n := r.IntN(20); {
		case n < 14:
			return "main"
		case n < 17:
			return pick([]string{"other", "ghost"})
		}
		return text()
	}
	id := func() string {
		if r.IntN(3) > 0 {
			return pick(p.taskIDs)
		}
		return pick(append([]string{"123", "0190A1B2-C3D4-7E5F-8A6B-7C8D9E0F1A2B", strings.ToUpper(p.taskIDs[0])}, hostileText...))
	}

	method, target := http.MethodGet, ""
	switch r.IntN(9) {
	case 0, 1, 2:
		method, target = http.MethodPost, "/v1/wallets/"+esc(walletName())+"/send-tx"
		if r.IntN(2) == 0 {
			target += "?task=" + esc(pick([]string{"true", "false", "1", "0", "TRUE", "", "yes", text()}))
		}
	case 3:
		target = "/v1/wallets/" + esc(walletName()) + "/tasks"
		var q []string
		for range r.IntN(4) {
			key := pick([]string{"status", "limit", "after", "colour", "status"})
			value := text()
			switch key {
			case "status":
				value = pick([]string{"waiting", "executing", "error", "done", "Done", "0", text()})
			case "limit":
				value = pick([]string{"0", "1", "1000", "1001", "-1", "1e3", text()})
			case "after":
				value = pick(append([]string{p.taskIDs[0], "\x00", "\xff"}, hostileText...))
			}
			q = append(q, esc(key)+"="+esc(value))
		}
		if len(q) > 0 {
			target += "?" + strings.Join(q, "&")
		}
	case 4, 5:
		method = pick([]string{http.MethodGet, http.MethodDelete, http.MethodDelete, http.MethodPut, http.MethodPatch})
		target = "/v1/wallets/" + esc(walletName()) + "/tasks/" + esc(id())
	case 6, 7:
		target = "/wallet/tasks/send-tx/" + esc(id())
	default:
		method = pick([]string{http.MethodGet, http.MethodPost})
		target = "/v1/wallets/" + esc(walletName()) + "/" + esc(text())
	}

	var body []byte
	if method == http.MethodPost {
		body = []byte(hostileSendTxBody(r))
	}
	req := httptest.NewRequest(method, "http://ledgerq.test/", bytes.NewReader(body))
	req.URL = &url.URL{Path: "/"}
	if u, err := url.ParseRequestURI(target); err == nil {
		req.URL, req.RequestURI = u, target
	}
	req.Header.Set("Content-Type", "application/json")

	key := pick(p.keys[:2])
	switch r.IntN(12) {
	case 0:
	case 1:
		req.Header.Set("X-API-Key", pick(append([]string{key}, p.keys...)))
	case 2:
		req.Header.Set("Authorization", pick([]string{"Bearer " + text(), "Basic " + text(), text(), "Bearer", "Bearer  " + key + " ", "bEaReR " + key}))
	case 3:
		req.Header.Add("Authorization", "Bearer "+key)
		req.Header.Add(pick([]string{"Authorization", "X-API-Key"}), pick([]string{key, p.keys[2], text()}))
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if r.IntN(2) == 0 {
		keys := []string{"k1", "k1", "k2", strings.Repeat("k", 256)}
		if r.IntN(3) == 0 {
			keys = hostileText
		}
		req.Header.Set("Idempotency-Key", pick(keys))
	}
	if strings.HasPrefix(target, "/wallet/") && r.IntN(6) > 0 {
		req.Header.Set("X-Wallet-ID", walletName())
		if r.IntN(8) == 0 {
			req.Header.Add("X-Wallet-ID", walletName())
		}
	}
	return req
}

func hostileSendTxBody(r *rand.Rand) string {
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	// Each field is mostly valid, so that many requests reach the store.
	maybe := func(good, bad []string) string {
		if r.IntN(3) == 0 {
			return pick(bad)
		}
		return pick(good)
	}
	fields := map[string]string{"to": `"` + recipient + `"`}
	if r.IntN(2) == 0 {
		fields["value"] = maybe([]string{`"0"`, `"1"`, `"0xff"`, `"1000000000000000000"`}, hostileValues)
	}
	if r.IntN(2) == 0 {
		fields["data"] = maybe([]string{`"0x"`, `"0xcafe"`, `"0xCAFE"`, `"0x` + strings.Repeat("ab", 1000) + `"`},
			[]string{`"cafe"`, `"0xcaf"`, `""`, `null`, `1`, `"0x` + strings.Repeat("ab", 128<<10) + `"`})
	}
	if r.IntN(3) == 0 {
		fields["gas_limit"] = maybe([]string{"21000", "9223372036854775807"}, hostileNumbers)
	}
	if r.IntN(3) == 0 {
		fields["priority"] = maybe([]string{"0", "-3", "2147483647"}, hostileNumbers)
	}
	switch r.IntN(16) {
	case 0:
		fields["to"] = hostileJSONString(r, pick(append([]string{recipient, strings.ToUpper(recipient), "0x8Ba1f109551bD432803012645Ac136ddd64DBA72", "0x"}, hostileText...)))
	case 1:
		fields["to"] = pick([]string{"5", "null", "[]", "{}", "true"})
	case 2:
		fields[pick([]string{"TO", "Value", "gasLimit", "colour", "nonce"})] = `"x"`
	case 3:
		delete(fields, "to")
	case 4:
		fields["value"] = hostileJSONString(r, pick(hostileText))
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		parts = append(parts, `"`+k+`":`+fields[k])
	}
	if r.IntN(16) == 0 {
		parts = append(parts, `"to":"`+recipient+`"`)
	}
	s := "{" + strings.Join(parts, ",") + "}"
	switch r.IntN(16) {
	case 0:
		s = pick([]string{"", "null", "[]", "{}", `"x"`, "[" + s + "]", s + s, s + "\x00", "\xef\xbb\xbf" + s, strings.Repeat("[", 20000)})
	case 1:
		i := r.IntN(len(s))
		switch r.IntN(3) {
		case 0:
			s = s[:i] + string(rune(r.IntN(256))) + s[i+1:]
		case 1:
			s = s[:i] + string([]byte{byte(r.IntN(256))}) + s[i:]
		default:
			s = s[:i]
		}
	}
	return s
}
