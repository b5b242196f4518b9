package node_test

// The wallet lane through its API, as a client uses it: a node with the API
// and every loop running against a simulated EVM chain. Nothing a client
// sends may stop, pause or slow a wallet.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// walletAPI is a running node with one wallet "w" holding 1000 ether on a
// simulated chain with 100 ms blocks, and a key for it.
type walletAPI struct {
	t     *testing.T
	url   string
	key   string
	chain *evmsim.Ledger
	st    *store.Store
	addr  common.Address
}

func startWalletAPI(t *testing.T, mutate func(*node.Config)) *walletAPI {
	t.Helper()
	db := testdb.New(t)
	signer := testfactory.NewSigner(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: 1337, Signer: signer})
	require.NoError(t, err)
	addr := common.Address(signer.Address())
	chain := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond,
		Alloc: map[common.Address]*big.Int{addr: new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))}})

	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Registry = reg
	cfg.Wallet.Ledger.Instance = chain
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.Wallet.Shards.Backoff = 100 * time.Millisecond
	cfg.API.TaskMaxWait = 0
	if mutate != nil {
		mutate(&cfg)
	}
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, apiKey, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("w")})
	require.NoError(t, err)
	return &walletAPI{t: t, url: srv.URL, key: apiKey, chain: chain, st: n.Store(), addr: addr}
}

type apiTask struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	TxHash        string `json:"tx_hash"`
	Error         string `json:"error"`
	MinedBlock    *int64 `json:"mined_block"`
	Confirmations *int64 `json:"confirmations"`
	Attempts      []struct {
		Nonce         int64  `json:"nonce"`
		TxHash        string `json:"tx_hash"`
		State         string `json:"state"`
		MaxFeePerGas  string `json:"max_fee_per_gas"`
		SentAt        string `json:"sent_at"`
		MinedBlock    *int64 `json:"mined_block"`
		Confirmations *int64 `json:"confirmations"`
		LastError     string `json:"last_error"`
	} `json:"attempts"`
}

// do sends a request with the wallet's key and returns the status and body.
func (w *walletAPI) do(method, path, body string) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	return resp.StatusCode, string(b)
}

// send posts a fire-and-forget send-tx and returns its task.
func (w *walletAPI) send(body string) apiTask {
	w.t.Helper()
	return w.taskAnswer(http.StatusAccepted, http.MethodPost, "/v1/wallets/w/send-tx?task=true", body)
}

func (w *walletAPI) task(id string) apiTask {
	w.t.Helper()
	return w.taskAnswer(http.StatusOK, http.MethodGet, "/v1/wallets/w/tasks/"+id, "")
}

// taskAnswer sends a request whose answer, with status want, is a task,
// and returns the task.
func (w *walletAPI) taskAnswer(want int, method, path, body string) apiTask {
	w.t.Helper()
	code, out := w.do(method, path, body)
	require.Equal(w.t, want, code, out)
	var r struct {
		Task apiTask `json:"task"`
	}
	require.NoError(w.t, json.Unmarshal([]byte(out), &r))
	return r.Task
}

// ended waits until the task is done or in error and returns it.
func (w *walletAPI) ended(id string) apiTask {
	w.t.Helper()
	var got apiTask
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		got = w.task(id)
		assert.Contains(c, []string{"done", "error"}, got.Status, "task %s: %+v", id, got)
	}, 20*time.Second, 50*time.Millisecond, "task %s did not end within 20 s", id)
	return got
}

// requireMovesOn sends a plain transfer and requires it done within the
// wait of ended: the wallet was neither stopped nor paused.
func (w *walletAPI) requireMovesOn() {
	w.t.Helper()
	got := w.ended(w.send(`{"to":"0x000000000000000000000000000000000000bEEF","value":"1"}`).ID)
	require.Equal(w.t, "done", got.Status, got.Error)
	code, out := w.do(http.MethodGet, "/v1/wallets/w", "")
	require.Equal(w.t, http.StatusOK, code)
	require.NotContains(w.t, out, `"paused":true`, out)
}

// An identical retry of a send-tx the node refused (more value than the
// wallet holds) is refused on its own and does not stop the wallet.
func TestWalletAPI_AnIdenticalRetryOfARefusedSendTxDoesNotStopTheWallet(t *testing.T) {
	t.Parallel()
	w := startWalletAPI(t, nil)
	body := `{"to":"0x000000000000000000000000000000000000dEaD","value":"2000000000000000000000"}`
	for range 2 {
		got := w.ended(w.send(body).ID)
		require.Equal(t, "error", got.Status)
		require.True(t, strings.HasPrefix(got.Error, "insufficient funds"), got.Error)
	}
	w.requireMovesOn()
}

// A task whose own fee cap the wallet cannot pay ends in error alone; the
// wallet is not paused and sends the next task at once.
func TestWalletAPI_ATasksUnaffordableFeesNeverPauseTheWallet(t *testing.T) {
	t.Parallel()
	w := startWalletAPI(t, func(c *node.Config) { c.API.MaxFeePerGas, _ = new(big.Int).SetString("1"+strings.Repeat("0", 30), 10) })
	got := w.ended(w.send(`{"to":"0x000000000000000000000000000000000000dEaD","value":"1","max_fee_per_gas":"1000000000000000000000000000000"}`).ID)
	require.Equal(t, "error", got.Status)
	require.True(t, strings.HasPrefix(got.Error, "insufficient funds"), got.Error)
	w.requireMovesOn()
}

// Every amount is bounded at the API: fees above --wallet-max-fee-per-gas,
// a uint256's top, gas limits outside 21000..2^53-1 are 400 naming the
// field, and store nothing.
func TestWalletAPI_AmountsBeyondWhatTheChainAndTheSchemaHoldAre400(t *testing.T) {
	t.Parallel()
	w := startWalletAPI(t, nil)
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)).String()
	to := `"to":"0x000000000000000000000000000000000000dEaD"`
	for body, field := range map[string]string{
		`{` + to + `,"max_fee_per_gas":"` + maxUint256 + `"}`:               "field max_fee_per_gas",
		`{` + to + `,"max_fee_per_gas":"10000000000001"}`:                   "field max_fee_per_gas",
		`{` + to + `,"max_priority_fee_per_gas":"10000000000001"}`:          "field max_priority_fee_per_gas",
		`{` + to + `,"value":"` + maxUint256 + `0"}`:                        "field value",
		`{` + to + `,"gas_limit":20999}`:                                    "field gas_limit",
		`{` + to + `,"gas_limit":9007199254740992}`:                         "field gas_limit",
		`{` + to + `,"gas_limit":99999999999999999999}`:                     "gas_limit",
		`{` + to + `,"priority":2147483648}`:                                "priority",
		`{` + to + `,"max_fee_per_gas":"1","max_priority_fee_per_gas":"2"}`: "field max_fee_per_gas",
	} {
		code, out := w.do(http.MethodPost, "/v1/wallets/w/send-tx?task=true", body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", body, out)
		require.Contains(t, out, field, body)
	}
	code, out := w.do(http.MethodGet, "/v1/wallets/w/tasks", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `[]`, mustField(t, out, "tasks"), "nothing stored")
	// The ceiling itself is taken, and the task is sent.
	got := w.ended(w.send(`{` + to + `,"value":"1","max_fee_per_gas":"10000000000000","max_priority_fee_per_gas":"1000000000"}`).ID)
	require.Equal(t, "done", got.Status, got.Error)
}

func mustField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	return string(m[field])
}

// GET of a task lists its attempts: nonce, hash, fees, state, send time, the
// block it was mined in and its confirmations; the task carries its block
// and confirmations too, executing until it is deep enough.
func TestWalletAPI_ATaskShowsEveryAttemptWithItsBlockAndConfirmations(t *testing.T) {
	t.Parallel()
	// 20 blocks of 100 ms between mined and final: a wallet check that runs
	// late on a loaded machine still finds the attempt mined and not final
	// (with 3, a .ci/run's checks came only once it was final).
	w := startWalletAPI(t, func(c *node.Config) { c.Wallet.Lane.Confirmations = 20 })
	id := w.send(`{"to":"0x000000000000000000000000000000000000dEaD","value":"7"}`).ID
	var mined apiTask
	var (
		mu   sync.Mutex
		seen = map[string]bool{} // task/attempt states, for the failure's message
	)
	found := assert.Eventually(t, func() bool {
		got := w.task(id)
		mu.Lock()
		defer mu.Unlock()
		for _, a := range got.Attempts {
			seen[got.Status+"/"+a.State] = true
		}
		mined = got
		return len(got.Attempts) == 1 && got.Attempts[0].State == "mined"
	}, 20*time.Second, 20*time.Millisecond, "mined, not yet final")
	mu.Lock()
	require.True(t, found, "task and attempt states seen: %v", seen)
	mu.Unlock()
	require.Equal(t, "executing", mined.Status)
	require.NotNil(t, mined.MinedBlock)
	require.NotNil(t, mined.Confirmations)
	// Counted from the head the wallet's last check recorded; not bounded
	// by the depth: a check whose receipt lookup failed leaves the attempt
	// mined for the next one while it records the head it read (a .ci/run
	// saw 4 here, before the answer was read from one snapshot).
	require.GreaterOrEqual(t, *mined.Confirmations, int64(1))
	got := w.ended(id)
	require.Equal(t, "done", got.Status)
	require.Len(t, got.Attempts, 1)
	a := got.Attempts[0]
	require.Equal(t, "confirmed", a.State)
	require.Equal(t, got.TxHash, a.TxHash)
	require.EqualValues(t, 0, a.Nonce)
	require.NotEmpty(t, a.MaxFeePerGas)
	require.NotEmpty(t, a.SentAt)
	require.Equal(t, *mined.MinedBlock, *a.MinedBlock)
	require.GreaterOrEqual(t, *a.Confirmations, int64(20))
	require.Equal(t, *a.Confirmations, *got.Confirmations)
	code, list := w.do(http.MethodGet, "/v1/wallets/w/tasks", "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, list, `"attempts"`, "lists leave the attempts out")
	rc, err := w.chain.TransactionReceipt(t.Context(), [32]byte(common.HexToHash(got.TxHash)))
	require.NoError(t, err)
	require.True(t, rc.Found, fmt.Sprintf("%s is on the chain", got.TxHash))
}
