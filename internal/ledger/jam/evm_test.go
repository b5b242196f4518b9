package jam_test

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

// storeRuntime is a contract that, called with 32 bytes, stores them in slot
// 0 and logs them as its one topic; called with none, returns slot 0.
const storeRuntime = "36600f5760005460005260206000f3" + "5b6000358060005560006000a100"

// storeInit deploys storeRuntime: it copies the 29 bytes after itself to
// memory and returns them.
const storeInit = "601d80600b6000396000f3" + storeRuntime

// evmBundle is a chain with the dev accounts funded, served over HTTP, and
// go-ethereum's ethclient on its POST /evm.
type evmBundle struct {
	*bundle
	eth *ethclient.Client
	rpc *rpc.Client
	url string
	// nonces are the next nonce of each dev account's key.
	nonces map[common.Address]uint64
}

func evmSetup(t *testing.T, cfg jam.Config) *evmBundle {
	t.Helper()
	cfg.FundDevAccounts = true
	return evmServe(t, setup(t, cfg))
}

// evmServe serves b's chain and dials its POST /evm.
func evmServe(t *testing.T, b *bundle) *evmBundle {
	t.Helper()
	srv := httptest.NewServer(jam.NewHandler(b.chain))
	t.Cleanup(srv.Close)
	rc, err := rpc.DialHTTP(srv.URL + "/evm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return &evmBundle{bundle: b, eth: ethclient.NewClient(rc), rpc: rc, url: srv.URL + "/evm", nonces: map[common.Address]uint64{}}
}

func dev(i int) jam.DevAccount { return jam.DevAccounts()[i] }

// send signs a dynamic-fee transaction from key with its next nonce (1 gwei
// tip, 2 gwei fee cap) for chain 1337.
func (e *evmBundle) send(t *testing.T, k *ecdsa.PrivateKey, to *common.Address, value *big.Int, gas uint64, data []byte) *types.Transaction {
	t.Helper()
	from := crypto.PubkeyToAddress(k.PublicKey)
	tx := signDynamic(t, k, e.nonces[from], to, value, gas, data)
	e.nonces[from]++
	return tx
}

func signDynamic(t *testing.T, k *ecdsa.PrivateKey, nonce uint64, to *common.Address, value *big.Int, gas uint64, data []byte) *types.Transaction {
	t.Helper()
	id := big.NewInt(jam.DefaultChainID)
	return ledgertest.SignTx(t, k, &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: gas, To: to, Value: value, Data: data,
	})
}

// execute submits txs as the next bundle on the executed one and moves the
// clock until the chain executed it; it returns the bundle's log entry.
func (e *evmBundle) execute(t *testing.T, txs ...*types.Transaction) jam.Execution {
	t.Helper()
	info, err := e.chain.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raws := make([][]byte, len(txs))
	for i, tx := range txs {
		raws[i] = ledgertest.RawTx(t, tx)
	}
	submit(t, e.chain, pkg(t, e.chain, info.Executed.Number+1, info.Executed.Hash, 1, raws...))
	e.advance(2)
	ex := e.chain.Executions()
	if len(ex) == 0 || ex[len(ex)-1].Number != info.Executed.Number+1 {
		t.Fatalf("bundle %d did not execute: log %+v", info.Executed.Number+1, ex)
	}
	return ex[len(ex)-1]
}

func (e *evmBundle) receipt(t *testing.T, tx *types.Transaction) *types.Receipt {
	t.Helper()
	r, err := e.eth.TransactionReceipt(ctx, tx.Hash())
	if err != nil {
		t.Fatalf("receipt of %s: %v", tx.Hash().Hex(), err)
	}
	return r
}

func (e *evmBundle) balance(t *testing.T, a common.Address, block *big.Int) *big.Int {
	t.Helper()
	b, err := e.eth.BalanceAt(ctx, a, block)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEVM_TransferIsExecutedInTheBlockWithItsBundlesNumber(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	e.advance(2)
	from, to := dev(0).Address, common.Address{0xbe, 0xef}
	before := e.balance(t, from, nil)
	if want, _ := new(big.Int).SetString(jam.DevAccountBalance, 10); before.Cmp(want) != 0 {
		t.Fatalf("dev account 0 has %s wei at genesis, want %s", before, want)
	}
	e.execute(t, e.send(t, dev(1).Key, &to, big.NewInt(1), 21_000, nil))
	value := big.NewInt(1e18)
	tx := e.send(t, dev(0).Key, &to, value, 21_000, nil)
	ex := e.execute(t, tx)

	r := e.receipt(t, tx)
	if r.Status != types.ReceiptStatusSuccessful || r.GasUsed != 21_000 || r.BlockNumber.Uint64() != 2 || ex.Number != 2 {
		t.Fatalf("receipt = status %d gas %d block %d, want 1, 21000, bundle %d", r.Status, r.GasUsed, r.BlockNumber, ex.Number)
	}
	if r.BlockHash.Hex() != ex.EVMHash {
		t.Fatalf("receipt's block %s, the log's EVM block %s", r.BlockHash.Hex(), ex.EVMHash)
	}
	paid := new(big.Int).Mul(big.NewInt(int64(r.GasUsed)), r.EffectiveGasPrice)
	if got, want := e.balance(t, from, nil), new(big.Int).Sub(before, new(big.Int).Add(value, paid)); got.Cmp(want) != 0 {
		t.Fatalf("sender's balance = %s, want %s", got, want)
	}
	if got := e.balance(t, to, nil); got.Cmp(big.NewInt(1e18+1)) != 0 {
		t.Fatalf("recipient's balance = %s, want 1 ether + 1 wei", got)
	}
	if got := e.balance(t, from, big.NewInt(1)); got.Cmp(before) != 0 {
		t.Fatalf("sender's balance at block 1 = %s, want %s", got, before)
	}
	if n, err := e.chain.NonceAt(ctx, ledger.Address(from)); err != nil || n != 1 {
		t.Fatalf("NonceAt = %d, %v; want 1", n, err)
	}
	if n, err := e.eth.NonceAt(ctx, from, nil); err != nil || n != 1 {
		t.Fatalf("eth_getTransactionCount = %d, %v; want 1", n, err)
	}

	blk, err := e.eth.BlockByNumber(ctx, big.NewInt(2))
	if err != nil {
		t.Fatal(err)
	}
	if blk.Hash().Hex() != ex.EVMHash || len(blk.Transactions()) != 1 || blk.Transactions()[0].Hash() != tx.Hash() {
		t.Fatalf("block 2 = %s with %d transactions, want %s with %s", blk.Hash().Hex(), len(blk.Transactions()), ex.EVMHash, tx.Hash().Hex())
	}
	if got := hexutil.Encode(blk.Extra()); got != ex.BlockHash {
		t.Fatalf("block 2's extraData = %s, want the bundle's hash %s", got, ex.BlockHash)
	}
	got, pending, err := e.eth.TransactionByHash(ctx, tx.Hash())
	if err != nil || pending || got.Hash() != tx.Hash() {
		t.Fatalf("TransactionByHash = %v, pending %v, %v", got, pending, err)
	}
	if n, err := e.eth.BlockNumber(ctx); err != nil || n != 2 {
		t.Fatalf("eth_blockNumber = %d, %v; want 2", n, err)
	}
}

func TestEVM_BlockTagsAreTheLastExecutedBlockAndEarliestIsGenesis(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	to := common.Address{0x01}
	ex := e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	for _, tag := range []string{"latest", "safe", "finalized", "pending", "0x1"} {
		var blk struct {
			Number       hexutil.Uint64    `json:"number"`
			Hash         common.Hash       `json:"hash"`
			Transactions []json.RawMessage `json:"transactions"`
		}
		if err := e.rpc.CallContext(ctx, &blk, "eth_getBlockByNumber", tag, true); err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		if blk.Number != 1 || blk.Hash.Hex() != ex.EVMHash || len(blk.Transactions) != 1 || !bytes.Contains(blk.Transactions[0], []byte(`"from"`)) {
			t.Errorf("%s = block %d %s, %d transactions; want block 1 %s with its full transaction", tag, blk.Number, blk.Hash.Hex(), len(blk.Transactions), ex.EVMHash)
		}
	}
	var genesis map[string]any
	if err := e.rpc.CallContext(ctx, &genesis, "eth_getBlockByNumber", "earliest", false); err != nil || genesis["number"] != "0x0" {
		t.Fatalf("earliest = %v, %v; want block 0", genesis["number"], err)
	}
	var beyond map[string]any
	if err := e.rpc.CallContext(ctx, &beyond, "eth_getBlockByNumber", "0x2", false); err != nil || beyond != nil {
		t.Fatalf("block 2 before it executed = %v, %v; want null", beyond, err)
	}
	byHash, err := e.eth.BlockByHash(ctx, common.HexToHash(ex.EVMHash))
	if err != nil || byHash.NumberU64() != 1 {
		t.Fatalf("BlockByHash = %v, %v", byHash, err)
	}
}

func TestEVM_ContractIsDeployedCalledAndEstimated(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	deploy := e.send(t, dev(0).Key, nil, nil, 200_000, common.FromHex(storeInit))
	e.execute(t, deploy)
	r := e.receipt(t, deploy)
	contract := crypto.CreateAddress(dev(0).Address, 0)
	if r.Status != types.ReceiptStatusSuccessful || r.ContractAddress != contract {
		t.Fatalf("deploy receipt: status %d contract %s, want 1 and %s", r.Status, r.ContractAddress.Hex(), contract.Hex())
	}
	if code, err := e.eth.CodeAt(ctx, contract, nil); err != nil || hexutil.Encode(code) != "0x"+storeRuntime {
		t.Fatalf("code = %x, %v; want %s", code, err, storeRuntime)
	}

	value := common.BigToHash(big.NewInt(42))
	set := ethereum.CallMsg{From: dev(0).Address, To: &contract, Data: value[:]}
	gas, err := e.eth.EstimateGas(ctx, set)
	if err != nil || gas <= 21_000 || gas > 100_000 {
		t.Fatalf("eth_estimateGas of a store = %d, %v; want above a transfer's", gas, err)
	}
	store := e.send(t, dev(0).Key, &contract, nil, gas, value[:])
	e.execute(t, store)
	if r := e.receipt(t, store); r.Status != types.ReceiptStatusSuccessful || r.GasUsed > gas {
		t.Fatalf("store with the estimated %d gas: status %d, used %d", gas, r.Status, r.GasUsed)
	}
	out, err := e.eth.CallContract(ctx, ethereum.CallMsg{To: &contract}, nil)
	if err != nil || common.BytesToHash(out) != value {
		t.Fatalf("eth_call = %x, %v; want 42", out, err)
	}
	if out, err := e.eth.CallContract(ctx, ethereum.CallMsg{To: &contract}, big.NewInt(1)); err != nil || common.BytesToHash(out) != (common.Hash{}) {
		t.Fatalf("eth_call at block 1 = %x, %v; want 0", out, err)
	}
	if slot, err := e.eth.StorageAt(ctx, contract, common.Hash{}, nil); err != nil || common.BytesToHash(slot) != value {
		t.Fatalf("eth_getStorageAt = %x, %v; want 42", slot, err)
	}
	to := common.Address{0x02}
	if gas, err := e.eth.EstimateGas(ctx, ethereum.CallMsg{From: dev(0).Address, To: &to, Value: big.NewInt(1)}); err != nil || gas != 21_000 {
		t.Fatalf("eth_estimateGas of a transfer = %d, %v; want 21000", gas, err)
	}

	logs, err := e.eth.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{contract}, Topics: [][]common.Hash{{value}}})
	if err != nil || len(logs) != 1 || logs[0].TxHash != store.Hash() || logs[0].BlockNumber != 2 {
		t.Fatalf("eth_getLogs = %+v, %v; want the store's one log in block 2", logs, err)
	}
	blockHash := e.receipt(t, store).BlockHash
	if logs, err := e.eth.FilterLogs(ctx, ethereum.FilterQuery{BlockHash: &blockHash}); err != nil || len(logs) != 1 {
		t.Fatalf("eth_getLogs by block hash = %d logs, %v; want 1", len(logs), err)
	}
	if logs, err := e.eth.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: big.NewInt(3), Topics: [][]common.Hash{{value}}}); err != nil || len(logs) != 0 {
		t.Fatalf("eth_getLogs from block 3, not executed yet = %d logs, %v; want none", len(logs), err)
	}
	if _, err := e.eth.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: big.NewInt(2), ToBlock: big.NewInt(1)}); err == nil {
		t.Fatal("eth_getLogs from block 2 to 1 answered")
	}
	other := common.BigToHash(big.NewInt(7))
	if logs, err := e.eth.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: big.NewInt(0), Topics: [][]common.Hash{{other}}}); err != nil || len(logs) != 0 {
		t.Fatalf("eth_getLogs for another topic = %d logs, %v; want none", len(logs), err)
	}
}

func TestEVM_FeeHistoryTipAndGasPriceAnswer(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	to := common.Address{0x03}
	for range 3 {
		e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	}
	tip, err := e.eth.SuggestGasTipCap(ctx)
	if err != nil || tip.Cmp(big.NewInt(1e9)) != 0 {
		t.Fatalf("eth_maxPriorityFeePerGas = %v, %v; want the 1 gwei the blocks paid", tip, err)
	}
	head, err := e.eth.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	price, err := e.eth.SuggestGasPrice(ctx)
	if err != nil || price.Cmp(new(big.Int).Add(tip, head.BaseFee)) != 0 {
		t.Fatalf("eth_gasPrice = %v, %v; want tip + base fee %s", price, err, head.BaseFee)
	}
	fh, err := e.eth.FeeHistory(ctx, 2, nil, []float64{50})
	if err != nil {
		t.Fatal(err)
	}
	if fh.OldestBlock.Uint64() != 2 || len(fh.BaseFee) != 3 || len(fh.GasUsedRatio) != 2 || len(fh.Reward) != 2 ||
		fh.Reward[1][0].Cmp(big.NewInt(1e9)) != 0 || fh.BaseFee[1].Cmp(head.BaseFee) != 0 {
		t.Fatalf("eth_feeHistory = oldest %v, base fees %v, ratios %v, rewards %v", fh.OldestBlock, fh.BaseFee, fh.GasUsedRatio, fh.Reward)
	}
}

func TestEVM_RefusedTransactionIsSkippedWithItsReasonAndNeverMinedLater(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	poor, _ := crypto.ToECDSA(common.LeftPadBytes([]byte{0x99}, 32))
	to := common.Address{0x04}
	unfunded := signDynamic(t, poor, 0, &to, big.NewInt(1), 21_000, nil)
	// Dev account 1's nonce 1 before its nonce 0: a gap.
	early := signDynamic(t, dev(1).Key, 1, &to, big.NewInt(1), 21_000, nil)
	ok := e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil)
	ex := e.execute(t, unfunded, early, ok)

	reasons := map[string]string{}
	for _, s := range ex.Skipped {
		reasons[s.Hash] = s.Reason
	}
	if len(ex.Skipped) != 2 || !strings.Contains(reasons[unfunded.Hash().Hex()], "insufficient funds") ||
		!strings.Contains(reasons[early.Hash().Hex()], "nonce too high") {
		t.Fatalf("skipped = %+v; want the unfunded one (insufficient funds) and the early one (nonce too high)", ex.Skipped)
	}
	// Nonce 0 makes nonce 1 next: a pool would mine it now. It is gone.
	e.execute(t, signDynamic(t, dev(1).Key, 0, &to, big.NewInt(1), 21_000, nil))
	for n := uint64(1); n <= 2; n++ {
		blk, err := e.eth.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil || len(blk.Transactions()) != 1 {
			t.Fatalf("block %d = %v, %v; want one transaction", n, blk, err)
		}
	}
	for _, tx := range []*types.Transaction{unfunded, early} {
		if _, err := e.eth.TransactionReceipt(ctx, tx.Hash()); !errors.Is(err, ethereum.NotFound) {
			t.Fatalf("receipt of skipped %s: %v, want not found", tx.Hash().Hex(), err)
		}
	}
	if n, _ := e.chain.NonceAt(ctx, ledger.Address(dev(1).Address)); n != 1 {
		t.Fatalf("dev account 1's nonce = %d, want 1", n)
	}
	if s := e.chain.Stats(); s.Skipped != 2 || s.NonceGaps != 1 {
		t.Fatalf("stats: skipped %d, nonce gaps %d; want 2 and 1", s.Skipped, s.NonceGaps)
	}
}

func TestEVM_ChainIDIsTheConfigs(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{ChainID: 31337})
	if id, err := e.eth.ChainID(ctx); err != nil || id.Int64() != 31337 {
		t.Fatalf("eth_chainId = %v, %v; want 31337", id, err)
	}
	if v, err := e.eth.NetworkID(ctx); err != nil || v.Int64() != 31337 {
		t.Fatalf("net_version = %v, %v; want 31337", v, err)
	}
	to := common.Address{0x05}
	ex := e.execute(t, signDynamic(t, dev(0).Key, 0, &to, big.NewInt(1), 21_000, nil))
	if len(ex.Skipped) != 1 || !strings.Contains(ex.Skipped[0].Reason, "chain id") {
		t.Fatalf("a transaction for chain 1337 on chain 31337: skipped %+v", ex.Skipped)
	}
}

// rpcCode is a JSON-RPC error's code.
func rpcCode(err error) int {
	var re rpc.Error
	if errors.As(err, &re) {
		return re.ErrorCode()
	}
	return 0
}

func TestEVM_OtherMethodsAreRefusedAsGethRefusesThem(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	for _, method := range []string{"eth_sendRawTransaction", "eth_accounts", "debug_traceTransaction"} {
		var out any
		err := e.rpc.CallContext(ctx, &out, method)
		if rpcCode(err) != -32601 || err.Error() != "the method "+method+" does not exist/is not available" {
			t.Errorf("%s: %v (code %d), want -32601 and geth's message", method, err, rpcCode(err))
		}
	}
	var out any
	if err := e.rpc.CallContext(ctx, &out, "eth_getBalance", "0x12"); rpcCode(err) != -32602 {
		t.Errorf("eth_getBalance of a bad address: %v, want -32602", err)
	}
	// geth answers rpc_modules with the namespaces it serves.
	var modules map[string]string
	if err := e.rpc.CallContext(ctx, &modules, "rpc_modules"); err != nil || len(modules) != 4 || modules["eth"] == "" || modules["net"] == "" || modules["web3"] == "" || modules["rpc"] == "" {
		t.Errorf("rpc_modules = %v, %v; want eth, net, web3 and rpc", modules, err)
	}
}

func TestEVM_BatchIsAnsweredRequestByRequest(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	var id hexutil.Big
	var n hexutil.Uint64
	var bal hexutil.Big
	var nothing any
	batch := []rpc.BatchElem{
		{Method: "eth_chainId", Result: &id},
		{Method: "eth_blockNumber", Result: &n},
		{Method: "eth_getBalance", Args: []any{dev(2).Address, "latest"}, Result: &bal},
		{Method: "eth_mining", Result: &nothing},
	}
	if err := e.rpc.BatchCallContext(ctx, batch); err != nil {
		t.Fatal(err)
	}
	want, _ := new(big.Int).SetString(jam.DevAccountBalance, 10)
	if batch[0].Error != nil || id.ToInt().Int64() != 1337 || batch[1].Error != nil || n != 0 ||
		batch[2].Error != nil || bal.ToInt().Cmp(want) != 0 || rpcCode(batch[3].Error) != -32601 {
		t.Fatalf("batch = %+v", batch)
	}
}

// post sends body to the EVM endpoint as JSON.
func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/evm", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	return w
}

func TestEVM_InProcessHandlerServesTheSameAndRefusesBadBodies(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{ChainID: 7})
	h := e.chain.EVMHandler()
	w := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"jsonrpc":"2.0","id":1,"result":"0x7"}` {
		t.Fatalf("eth_chainId in process = %d %s", w.Code, w.Body)
	}
	w = post(t, h, `[{"jsonrpc":"2.0","id":"a","method":"net_version"},{"jsonrpc":"2.0","id":"b","method":"eth_syncing"}]`)
	if got := strings.TrimSpace(w.Body.String()); got != `[{"jsonrpc":"2.0","id":"a","result":"7"},{"jsonrpc":"2.0","id":"b","result":false}]` {
		t.Fatalf("batch in process = %s", got)
	}
	for body, code := range map[string]string{
		`{"jsonrpc":"2.0","id":1,`: `"code":-32700`,
		`[]`:                       `"code":-32600`,
		`[1]`:                      `"code":-32600`,
		`{"jsonrpc":"2.0","id":1,"method":"x_y"}`:                      `"code":-32601`,
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[1]}`: `"code":-32602`,
	} {
		if w := post(t, h, body); !strings.Contains(w.Body.String(), code) {
			t.Errorf("%s: %d %s, want %s", body, w.Code, w.Body, code)
		}
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["` + strings.Repeat("0", jam.MaxEVMRequestBytes) + `"]}`
	if w := post(t, h, huge); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over %d bytes: %d %s", jam.MaxEVMRequestBytes, w.Code, w.Body)
	}
	if w := post(t, h, `{"jsonrpc":"2.0","method":"eth_chainId"}`); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Fatalf("a notification: %d %q, want no answer", w.Code, w.Body)
	}
	// geth's rpc.Server takes JSON only, and a request only with "jsonrpc":"2.0".
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/evm", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)))
	if w.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("a body without a JSON content type: %d %s, want 415", w.Code, w.Body)
	}
	if w := post(t, h, `{"id":1,"method":"eth_chainId"}`); !strings.Contains(w.Body.String(), `"code":-32600`) {
		t.Fatalf("a request without \"jsonrpc\":\"2.0\": %d %s, want -32600", w.Code, w.Body)
	}
}

func TestEVM_ReadsRunAlongsideExecutions(t *testing.T) {
	t.Parallel()
	e := evmSetup(t, jam.Config{})
	h := e.chain.EVMHandler()
	reads := `[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["` + dev(0).Address.Hex() + `","latest"]},` +
		`{"jsonrpc":"2.0","id":2,"method":"eth_feeHistory","params":["0x4","latest",[50]]},` +
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["latest",true]}]`
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if w := post(t, h, reads); w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"error"`) {
					t.Errorf("reads during executions: %d %s", w.Code, w.Body)
					return
				}
			}
		})
	}
	to := common.Address{0x0a}
	for range 5 {
		e.execute(t, e.send(t, dev(0).Key, &to, big.NewInt(1), 21_000, nil))
	}
	close(stop)
	wg.Wait()
}
