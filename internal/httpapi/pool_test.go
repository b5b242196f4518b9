package httpapi_test

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

const poolChainID = 4242

const gwei = 1_000_000_000

type poolFixture struct {
	*apiFixture
	chain *ledgertest.PoolChain
	evm   *ledgertest.EVMRPC
	clock *clock.Fake
	cfg   builder.Config
}

// poolConfig is the builder lane's default Config on chain id 4242, its
// pool's chain calls bounded at 2 s.
func poolConfig() builder.Config {
	c := builder.Defaults()
	c.Pool.ChainID, c.Ledger.Timeout = poolChainID, 2*time.Second
	return c
}

// setupPool serves the API with the builder lane on, chain id 4242, over a
// fresh database, an in-memory chain on which every nonce is 0 and an
// in-memory EVM JSON-RPC that answers nothing until told to.
func setupPool(t *testing.T, mutate ...func(*builder.Config)) *poolFixture {
	t.Helper()
	return setupPoolAPI(t, httpapi.DefaultConfig(), mutate...)
}

// setupPoolAPI is setupPool with the API's configuration cfg.
func setupPoolAPI(t *testing.T, cfg httpapi.Config, mutate ...func(*builder.Config)) *poolFixture {
	t.Helper()
	db := testdb.New(t)
	pc := poolConfig()
	for _, m := range mutate {
		m(&pc)
	}
	chain := ledgertest.NewPoolChain()
	evm := ledgertest.NewEVMRPC()
	// Every sender holds 1000 ether unless a test says otherwise.
	evm.Answer("eth_getBalance", `"0x3635c9adc5dea00000"`)
	clk := clock.NewFake(t0)
	m := metrics.New()
	api := httpapi.New(cfg, httpapi.Deps{
		Store: db.Store, Clock: clk, Logger: testLogger(t), Pool: &pc, PoolChain: chain, EVM: evm, Version: "v9.9.9-test", Metrics: m,
	})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &poolFixture{apiFixture: &apiFixture{t: t, db: db, url: srv.URL, key: adminKey(t, db.Store), metrics: m}, chain: chain, evm: evm, clock: clk, cfg: pc}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return key
}

func addr(key *ecdsa.PrivateKey) common.Address { return crypto.PubkeyToAddress(key.PublicKey) }

var poolRecipient = common.HexToAddress("0x00000000000000000000000000000000000000b2")

// dynTx signs a dynamic-fee transfer with fees in gwei.
func dynTx(t testing.TB, key *ecdsa.PrivateKey, nonce uint64, feeCapGwei, tipGwei int64) *types.Transaction {
	t.Helper()
	return signTx(t, key, poolChainID, &types.DynamicFeeTx{
		ChainID: big.NewInt(poolChainID), Nonce: nonce, GasFeeCap: big.NewInt(feeCapGwei * gwei),
		GasTipCap: big.NewInt(tipGwei * gwei), Gas: 21000, To: &poolRecipient, Value: big.NewInt(1),
	})
}

func signTx(t testing.TB, key *ecdsa.PrivateKey, chainID int64, data types.TxData) *types.Transaction {
	t.Helper()
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(big.NewInt(chainID)), data)
	require.NoError(t, err)
	return tx
}

func rawHex(t testing.TB, tx *types.Transaction) string {
	t.Helper()
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	return hexutil.Encode(raw)
}

type poolTxOut struct {
	Success  bool    `json:"success"`
	Created  *bool   `json:"created"`
	Replaced *string `json:"replaced"`
	Tx       struct {
		Hash        string    `json:"hash"`
		Sender      string    `json:"sender"`
		Nonce       int64     `json:"nonce"`
		Type        int       `json:"type"`
		GasFeeCap   string    `json:"gas_fee_cap"`
		GasTipCap   string    `json:"gas_tip_cap"`
		State       string    `json:"state"`
		ReplacedBy  string    `json:"replaced_by"`
		DropReason  string    `json:"drop_reason"`
		BundleBlock *int64    `json:"bundle_block"`
		ReceivedAt  time.Time `json:"received_at"`
		ExpiresAt   time.Time `json:"expires_at"`
	} `json:"tx"`
}

func (f *poolFixture) postTx(tx *types.Transaction) (httpResult, poolTxOut) {
	f.t.Helper()
	return f.postRaw(rawHex(f.t, tx))
}

func (f *poolFixture) postRaw(raw string) (httpResult, poolTxOut) {
	f.t.Helper()
	resp := f.post("/v1/pool/txs", []byte(fmt.Sprintf(`{"raw":%q}`, raw)))
	var out poolTxOut
	if resp.StatusCode < 300 {
		require.NoError(f.t, json.Unmarshal([]byte(resp.Body), &out), resp.Body)
	}
	return resp, out
}

func (f *poolFixture) status(hash common.Hash) poolTxOut {
	f.t.Helper()
	resp := f.get("/v1/pool/txs/" + hash.Hex())
	require.Equal(f.t, http.StatusOK, resp.StatusCode, resp.Body)
	var out poolTxOut
	require.NoError(f.t, json.Unmarshal([]byte(resp.Body), &out))
	return out
}

func TestPoolAPI_PostStoresPendingOrQueuedAndGetAnswersEveryState(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	key := newKey(t)

	first := dynTx(t, key, 0, 2, 1)
	resp, out := f.postTx(first)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	require.True(t, *out.Created)
	require.Equal(t, first.Hash().Hex(), out.Tx.Hash)
	require.Equal(t, strings.ToLower(addr(key).Hex()), out.Tx.Sender)
	require.Equal(t, "pending", out.Tx.State)
	require.Equal(t, "2000000000", out.Tx.GasFeeCap)
	require.True(t, out.Tx.ExpiresAt.Equal(t0.Add(time.Hour)), "TTL 1 h from %s: %s", t0, out.Tx.ExpiresAt)

	gapped := dynTx(t, key, 2, 2, 1)
	resp, out = f.postTx(gapped)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	require.Equal(t, "queued", out.Tx.State)

	again, out := f.postTx(first)
	require.Equal(t, http.StatusOK, again.StatusCode, "the same bytes: already known, answered as an idempotent repost: %s", again.Body)
	require.False(t, *out.Created)

	dearer := dynTx(t, key, 0, 3, 2)
	resp, out = f.postTx(dearer)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	require.Equal(t, first.Hash().Hex(), *out.Replaced)
	replaced := f.status(first.Hash())
	require.Equal(t, "replaced", replaced.Tx.State)
	require.Equal(t, dearer.Hash().Hex(), replaced.Tx.ReplacedBy)

	_, err := f.db.Store.DB().Exec(t.Context(), `UPDATE ledgerq.pool_txs SET state = 'included', bundle_block = 12 WHERE tx_hash = $1`, strings.ToLower(dearer.Hash().Hex()))
	require.NoError(t, err)
	included := f.status(dearer.Hash())
	require.Equal(t, "included", included.Tx.State)
	require.Equal(t, int64(12), *included.Tx.BundleBlock)

	_, _, err = f.db.Store.PoolExpire(t.Context(), store.PoolExpireParams{Now: t0.Add(time.Hour), ChainID: poolChainID, MaxSenders: 10})
	require.NoError(t, err)
	dropped := f.status(gapped.Hash())
	require.Equal(t, "dropped", dropped.Tx.State)
	require.Equal(t, "expired", dropped.Tx.DropReason)

	missing := f.get("/v1/pool/txs/" + common.Hash{1}.Hex())
	require.Equal(t, http.StatusNotFound, missing.StatusCode, missing.Body)
	bad := f.get("/v1/pool/txs/0x1234")
	require.Equal(t, http.StatusBadRequest, bad.StatusCode, bad.Body)
	require.Contains(t, bad.Body, "path parameter hash")
}

func TestPoolAPI_RefusalsAnswerGethsMessagesWithTheirStatus(t *testing.T) {
	t.Parallel()
	f := setupPool(t, func(c *builder.Config) {
		c.Pool.Limits.MaxPending, c.Pool.Limits.AccountQueue, c.Pool.Limits.AccountSlots = 2, 2, 0
	}) // no slots: MaxPending bounds every sender
	key := newKey(t)
	f.chain.SetNonce(addr(key), 1)
	for _, tc := range []struct {
		name    string
		tx      *types.Transaction
		status  int
		message string
	}{
		{"nonce below the chain's", dynTx(t, key, 0, 2, 1), 409, "nonce too low: next nonce 1, tx nonce 0"},
		{"first", dynTx(t, key, 1, 2, 1), 201, ""},
		{"the same bytes again", dynTx(t, key, 1, 2, 1), 200, ""},
		{"replacement +5 %", signTx(t, key, poolChainID, &types.DynamicFeeTx{
			ChainID: big.NewInt(poolChainID), Nonce: 1, GasFeeCap: big.NewInt(2_100_000_000), GasTipCap: big.NewInt(1_050_000_000),
			Gas: 21000, To: &poolRecipient,
		}), 409, "replacement transaction underpriced"},
		{"queued 3", dynTx(t, key, 3, 2, 1), 201, ""},
		{"queued 4", dynTx(t, key, 4, 2, 1), 201, ""},
		{"queued 5, past the sender's queue", dynTx(t, key, 5, 2, 1), 429, "account limit exceeded: pooled 3 txs"},
	} {
		resp, _ := f.postTx(tc.tx)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, resp.Body)
		if tc.message != "" {
			require.JSONEq(t, fmt.Sprintf(`{"success":false,"message":%q}`, tc.message), resp.Body, tc.name)
		}
	}
	other := newKey(t)
	resp, _ := f.postTx(dynTx(t, other, 0, 2, 1))
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	resp, _ = f.postTx(dynTx(t, newKey(t), 0, 2, 1))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"message":"txpool is full"`)

	f.chain.SetError(fmt.Errorf("connection refused"))
	resp, _ = f.postTx(dynTx(t, other, 1, 2, 1))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, resp.Body)
}

// The validation rules of jamduna's transaction pool and the decoding, each
// refused with geth's message and nothing stored.
func TestPoolAPI_TheBuildersValidationRulesRefuseTheTransaction(t *testing.T) {
	t.Parallel()
	// A block gas limit under the per-transaction cap (EIP-7825), so that
	// the block's limit decides.
	f := setupPool(t, func(c *builder.Config) { c.Pool.MaxTxSize, c.Pool.BlockGasLimit = 1024, 10_000_000 })
	key := newKey(t)
	dyn := func(mut func(*types.DynamicFeeTx)) *types.Transaction {
		d := &types.DynamicFeeTx{ChainID: big.NewInt(poolChainID), GasFeeCap: big.NewInt(2 * gwei), GasTipCap: big.NewInt(gwei),
			Gas: 21000, To: &poolRecipient, Value: big.NewInt(1)}
		mut(d)
		return signTx(t, key, poolChainID, d)
	}
	legacy := func(chainID int64, price int64) *types.Transaction {
		return signTx(t, key, chainID, &types.LegacyTx{GasPrice: big.NewInt(price), Gas: 21000, To: &poolRecipient})
	}
	unprotected, err := types.SignTx(types.NewTx(&types.LegacyTx{GasPrice: big.NewInt(gwei), Gas: 21000, To: &poolRecipient}), types.HomesteadSigner{}, key)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		tx      *types.Transaction
		status  int
		message string
	}{
		{"size over the limit", dyn(func(d *types.DynamicFeeTx) { d.Data = make([]byte, 1100); d.Gas = 100000 }), 413, "oversized data: transaction size 1"},
		{"tip below the minimum price", dyn(func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(gwei - 1) }), 400,
			"transaction gas price below minimum: gas tip cap 999999999, minimum needed 1000000000"},
		{"legacy gas price below the minimum", legacy(poolChainID, gwei-1), 400, "transaction gas price below minimum: gas tip cap 999999999"},
		{"gas 0", dyn(func(d *types.DynamicFeeTx) { d.Gas = 0 }), 400, "intrinsic gas too low: gas 0, minimum needed 21000"},
		{"gas below the data's cost", dyn(func(d *types.DynamicFeeTx) { d.Data = []byte{1, 0} }), 400, "intrinsic gas too low: gas 21000, minimum needed 21020"},
		{"gas over the block limit", dyn(func(d *types.DynamicFeeTx) { d.Gas = 10_000_001 }), 400, "exceeds block gas limit"},
		{"gas over the transaction cap", dyn(func(d *types.DynamicFeeTx) { d.Gas = 16_777_217 }), 400, "transaction gas limit too high (cap: 16777216, tx: 16777217)"},
		{"tip above the fee cap", dyn(func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(3 * gwei) }), 400, "max priority fee per gas higher than max fee per gas"},
		{"another chain id", signTx(t, key, 1, &types.DynamicFeeTx{ChainID: big.NewInt(1), GasFeeCap: big.NewInt(gwei), GasTipCap: big.NewInt(gwei), Gas: 21000, To: &poolRecipient}),
			400, "invalid sender: invalid chain id for signer: have 1 want 4242"},
		{"legacy of another chain", legacy(1, gwei), 400, "invalid sender: invalid chain id for signer: have 1 want 4242"},
		{"not replay-protected", unprotected, 400, "only replay-protected (EIP-155) transactions allowed over RPC"},
	} {
		resp, _ := f.postTx(tc.tx)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, resp.Body)
		require.Contains(t, resp.Body, tc.message, tc.name)
	}
	resp, _ := f.postRaw("0x02c0")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "rlp")
	resp, _ = f.postRaw("0x05c0")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "transaction type not supported")
	require.Equal(t, 0, f.poolRows(), "nothing stored")

	// Every transaction type the pool takes.
	for _, tx := range []*types.Transaction{
		legacy(poolChainID, gwei),
		signTx(t, key, poolChainID, &types.AccessListTx{ChainID: big.NewInt(poolChainID), Nonce: 1, GasPrice: big.NewInt(gwei), Gas: 21000 + 2400 + 1900, To: &poolRecipient,
			AccessList: types.AccessList{{Address: poolRecipient, StorageKeys: []common.Hash{{1}}}}}),
		signTx(t, key, poolChainID, &types.DynamicFeeTx{ChainID: big.NewInt(poolChainID), Nonce: 2, GasFeeCap: big.NewInt(gwei), GasTipCap: big.NewInt(gwei), Gas: 53000 + 16*3 + 2, Data: []byte{1, 2, 3}}),
	} {
		resp, out := f.postTx(tx)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "type %d: %s", tx.Type(), resp.Body)
		require.Equal(t, int(tx.Type()), out.Tx.Type)
		require.Equal(t, "pending", out.Tx.State)
	}
}

func (f *poolFixture) poolRows() int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.db.Store.DB().QueryRow(f.t.Context(), `SELECT count(*) FROM ledgerq.pool_txs`).Scan(&n))
	return n
}

func TestPoolAPI_TheLaneOffAnswers404(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, resp := range []httpResult{
		f.post("/rpc", []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)),
		f.post("/v1/pool/txs", []byte(`{"raw":"0x00"}`)),
		f.get("/v1/pool/txs/" + common.Hash{1}.Hex()),
	} {
		require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
		require.JSONEq(t, `{"success":false,"message":"not found: the builder lane is off"}`, resp.Body)
	}
}

// rpcCall posts one JSON-RPC request and decodes the response.
func (f *poolFixture) rpcCall(method string, params ...any) (result json.RawMessage, rpcErr *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}) {
	f.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(f.t, err)
	resp := f.post("/rpc", body)
	require.Equal(f.t, http.StatusOK, resp.StatusCode, resp.Body)
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(f.t, json.NewDecoder(bytes.NewReader([]byte(resp.Body))).Decode(&out), resp.Body)
	return out.Result, out.Error
}
