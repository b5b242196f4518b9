package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/store"
)

type policyAnswer struct {
	Wallet, Source string
	UpdatedBy      string `json:"updated_by"`
	Policy         struct {
		Recipients []string
		Contracts  []struct {
			Address   string
			Functions []string
		}
		MaxValuePerTx string `json:"max_value_per_tx"`
	}
	ValueCapsUsed []struct{ Window, Max, Used string } `json:"value_caps_used"`
	FeeCapsUsed   []struct{ Window, Max, Used string } `json:"fee_caps_used"`
}

type refusalAnswer struct {
	Message, Rule, Limit, Used, Requested, Selector string
	WindowSeconds                                   int64 `json:"window_seconds"`
}

func decodeRefusal(t *testing.T, r httpResult) refusalAnswer {
	t.Helper()
	require.Equal(t, http.StatusForbidden, r.StatusCode, r.Body)
	var a refusalAnswer
	require.NoError(t, json.Unmarshal([]byte(r.Body), &a), r.Body)
	return a
}

const tokenContract = "0x00000000000000000000000000000000000000d1"

func TestWalletPolicy_AdminSetsAndRemovesAPolicyAuditedAndTheWalletsKeyReadsIt(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	admin := adminKey(t, f.db.Store)
	body := `{"recipients":["` + recipient + `"],"contracts":[{"address":"` + tokenContract + `","functions":["transfer(address, uint256)","0x095EA7B3"]}],` +
		`"max_value_per_tx":"1000","value_caps":[{"window":"24h","max":"5000"}],"fee_caps":[{"window":"1h","max":"9"}]}`

	put := f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(body), bearer(f.key)...)
	require.Equal(t, http.StatusForbidden, put.StatusCode, "the wallet's own key may not set it: %s", put.Body)
	require.Contains(t, put.Body, "needs admin")
	put = f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(body), bearer(admin)...)
	require.Equal(t, http.StatusOK, put.StatusCode, put.Body)

	require.Equal(t, http.StatusAccepted, f.sendTx("?task=true", `{"to":"`+recipient+`","value":"700","data":"0x"}`).StatusCode)
	got := f.call(http.MethodGet, "/v1/wallets/main/policy", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, got.StatusCode, got.Body)
	var a policyAnswer
	require.NoError(t, json.Unmarshal([]byte(got.Body), &a))
	require.Equal(t, "main", a.Wallet)
	require.Equal(t, "api", a.Source)
	require.Equal(t, "test", a.UpdatedBy)
	require.Equal(t, []string{recipient}, a.Policy.Recipients)
	require.Equal(t, []string{"0x095ea7b3", "transfer(address,uint256)"}, a.Policy.Contracts[0].Functions, "signatures as given (canonical), selectors by order")
	require.Equal(t, "1000", a.Policy.MaxValuePerTx)
	require.Equal(t, []struct{ Window, Max, Used string }{{"24h0m0s", "5000", "700"}}, a.ValueCapsUsed)
	require.Equal(t, []struct{ Window, Max, Used string }{{"1h0m0s", "9", "0"}}, a.FeeCapsUsed)
	other := f.call(http.MethodGet, "/v1/wallets/main/policy", nil, bearer(f.otherKey)...)
	require.Equal(t, http.StatusNotFound, other.StatusCode, "another wallet's key does not see it")

	del := f.call(http.MethodDelete, "/v1/wallets/main/policy", nil, bearer(f.key)...)
	require.Equal(t, http.StatusForbidden, del.StatusCode, del.Body)
	del = f.call(http.MethodDelete, "/v1/wallets/main/policy", nil, bearer(admin)...)
	require.Equal(t, http.StatusNoContent, del.StatusCode, del.Body)
	require.Equal(t, http.StatusNotFound, f.call(http.MethodGet, "/v1/wallets/main/policy", nil, bearer(f.key)...).StatusCode)
	require.Equal(t, http.StatusNotFound, f.call(http.MethodDelete, "/v1/wallets/main/policy", nil, bearer(admin)...).StatusCode)
	require.Equal(t, http.StatusAccepted, f.sendTx("?task=true", `{"to":"`+tokenContract+`","value":"1","data":"0x"}`).StatusCode,
		"a wallet without a policy is unrestricted")

	audit, err := f.db.Store.AuditList(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, audit, 2)
	require.Equal(t, "policy.delete", audit[0].Action)
	require.Equal(t, "policy.put", audit[1].Action)
	require.Equal(t, "wallet/main/policy", audit[1].Target)
	require.Contains(t, string(audit[1].Detail), `"via": "api"`)
	require.Contains(t, string(audit[1].Detail), "0xa9059cbb")
}

func TestWalletPolicy_APolicyTheConfigurationSetsIs409ToTheAPI(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	admin := adminKey(t, f.db.Store)
	require.NoError(t, f.db.Store.WalletPolicySyncConfig(context.Background(), t0, map[string]store.WalletPolicy{"main": {MaxValuePerTx: big.NewInt(5)}}))
	put := f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(`{"max_value_per_tx":"6"}`), bearer(admin)...)
	require.Equal(t, http.StatusConflict, put.StatusCode, put.Body)
	require.Contains(t, put.Body, "--wallet-policy")
	del := f.call(http.MethodDelete, "/v1/wallets/main/policy", nil, bearer(admin)...)
	require.Equal(t, http.StatusConflict, del.StatusCode, del.Body)
	var a policyAnswer
	require.NoError(t, json.Unmarshal([]byte(f.call(http.MethodGet, "/v1/wallets/main/policy", nil, bearer(f.key)...).Body), &a))
	require.Equal(t, "config", a.Source)
	require.Equal(t, "5", a.Policy.MaxValuePerTx)
}

func TestWalletPolicy_BadInputIs400NamingTheFieldAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	admin := adminKey(t, f.db.Store)
	for body, want := range map[string]string{
		`{"recipients":["0x12"]}`: "recipients[0]",
		`{"contracts":[{"address":"` + tokenContract + `","functions":["transfer(address,uint256"]}]}`: "contracts[0].functions[0]",
		`{"contracts":[{"address":"nope"}]}`:              "contracts[0].address",
		`{"max_value_per_tx":"1e18"}`:                     "max_value_per_tx",
		`{"max_value_per_tx":"-1"}`:                       "max_value_per_tx",
		`{"value_caps":[{"window":"forever","max":"1"}]}`: "value_caps[0].window",
		`{"value_caps":[{"window":"0s","max":"1"}]}`:      "value_caps[0].window",
		`{"fee_caps":[{"window":"1h","max":"1.5"}]}`:      "fee_caps[0].max",
		`{"fee_caps":[{"window":"1h"}]}`:                  "max",
		`{"colour":"red"}`:                                "colour",
		`{"value_caps":[{"window":"1h","max":"` + string(bytes.Repeat([]byte("9"), 79)) + `"}]}`: "value_caps[0].max",
	} {
		r := f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(body), bearer(admin)...)
		require.Equal(t, http.StatusBadRequest, r.StatusCode, body+": "+r.Body)
		require.Contains(t, r.Body, want, body)
	}
	require.Equal(t, http.StatusNotFound, f.call(http.MethodGet, "/v1/wallets/main/policy", nil, bearer(f.key)...).StatusCode)
}

func TestWalletPolicy_ARefusedSendTxIs403NamingTheRuleRecordedAndCounted(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	admin := adminKey(t, f.db.Store)
	put := f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(`{"contracts":[{"address":"`+tokenContract+`","functions":["transfer(address,uint256)"]}],"max_value_per_tx":"10"}`), bearer(admin)...)
	require.Equal(t, http.StatusOK, put.StatusCode, put.Body)

	a := decodeRefusal(t, f.sendTx("?task=true", txBody("1")))
	require.Equal(t, "contract", a.Rule)
	require.Contains(t, a.Message, recipient)
	a = decodeRefusal(t, f.sendTx("?task=true", `{"to":"`+tokenContract+`","function":"approve(address,uint256)","args":["`+recipient+`","1"]}`))
	require.Equal(t, "selector", a.Rule)
	require.Equal(t, "0x095ea7b3", a.Selector)
	a = decodeRefusal(t, f.sendTx("?task=true", `{"to":"`+tokenContract+`","value":"11","function":"transfer(address,uint256)","args":["`+recipient+`","1"]}`))
	require.Equal(t, refusalAnswer{Message: a.Message, Rule: "max_value", Limit: "10", Requested: "11"}, a)
	ok := f.sendTx("?task=true", `{"to":"`+tokenContract+`","value":"10","function":"transfer(address,uint256)","args":["`+recipient+`","1"]}`)
	require.Equal(t, http.StatusAccepted, ok.StatusCode, ok.Body)

	require.EqualValues(t, 1, f.metrics.PolicyRefusalCount("main", "selector"))
	require.EqualValues(t, 1, f.metrics.PolicyRefusalCount("main", "contract"))
	refusals, err := f.db.Store.WalletPolicyRefusals(context.Background(), "main", 10)
	require.NoError(t, err)
	require.Len(t, refusals, 3)
	require.Equal(t, "max_value", refusals[0].Rule)
}

// The concurrency test: 50 clients race over HTTP for a value cap
// that takes 20 of them; exactly 20 are stored, their sum within the cap,
// and the 30 others are 403 value_window. A cancelled waiting task and one
// ended in error give their value back: two more fit, and no third.
func TestWalletPolicy_FiftyConcurrentClientsRacingForAValueCapNeverPassIt(t *testing.T) {
	t.Parallel()
	f := setupWallets(t, func(c *httpapi.Config) { c.RequestTimeout = time.Minute })
	admin := adminKey(t, f.db.Store)
	const (
		clients = 50
		value   = "1000000000000000000" // 1 ether
		capWei  = "20500000000000000000"
	)
	put := f.call(http.MethodPut, "/v1/wallets/main/policy", []byte(`{"value_caps":[{"window":"24h","max":"`+capWei+`"}]}`), bearer(admin)...)
	require.Equal(t, http.StatusOK, put.StatusCode, put.Body)

	var wg sync.WaitGroup
	start := make(chan struct{})
	answers := make([]httpResult, clients)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for i := range clients {
		wg.Go(func() {
			<-start
			req := f.request(context.Background(), http.MethodPost, "/v1/wallets/main/send-tx?task=true",
				[]byte(`{"to":"`+recipient+`","value":"`+value+`","data":"0x"}`), bearer(f.key)...)
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = httpResult{Body: err.Error()}
				return
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			answers[i] = httpResult{StatusCode: resp.StatusCode, Header: resp.Header, Body: b.String()}
		})
	}
	close(start)
	wg.Wait()
	var accepted []string
	refused := 0
	for _, a := range answers {
		switch a.StatusCode {
		case http.StatusAccepted:
			accepted = append(accepted, decodeTask(t, a).Task.ID)
		default:
			r := decodeRefusal(t, a)
			require.Equal(t, "value_window", r.Rule)
			require.Equal(t, capWei, r.Limit)
			require.Equal(t, value, r.Requested)
			require.Equal(t, int64(86400), r.WindowSeconds)
			refused++
		}
	}
	require.Len(t, accepted, 20, "floor(cap / value)")
	require.Equal(t, clients-20, refused)
	var sum, rows string
	require.NoError(t, f.db.Store.Conns().QueryRow(context.Background(),
		`SELECT sum(value_wei)::text, count(*)::text FROM ledgerq.wallet_tasks WHERE wallet_id = 'main'`).Scan(&sum, &rows))
	require.Equal(t, "20000000000000000000", sum)
	require.Equal(t, "20", rows)
	require.EqualValues(t, clients-20, f.metrics.PolicyRefusalCount("main", "value_window"))

	// Give two back: a cancelled waiting task, and one that ended in error.
	require.Equal(t, http.StatusOK, f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+accepted[0], nil, bearer(f.key)...).StatusCode)
	_, err := f.db.Store.TaskFail(context.Background(), store.TaskFailParams{Now: t0, ID: accepted[1], Reason: "the node refused it"})
	require.NoError(t, err)
	body := `{"to":"` + recipient + `","value":"` + value + `","data":"0x"}`
	require.Equal(t, http.StatusAccepted, f.sendTx("?task=true", body).StatusCode)
	require.Equal(t, http.StatusAccepted, f.sendTx("?task=true", body).StatusCode)
	require.Equal(t, "value_window", decodeRefusal(t, f.sendTx("?task=true", body)).Rule)
}
