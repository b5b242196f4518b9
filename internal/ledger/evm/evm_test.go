package evm_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// The adapter's rules run three times: in-process against
// ethclient/simulated (TestLedger_Simulated) and over HTTP against a real
// `geth --dev --dev.period 1` (TestLedger_Geth) and a real anvil
// (TestLedger_Anvil), with the same assertions. A real node
// makes a block every second whatever the test does, so a case that must see
// a transaction before it is mined either asks bundle.holdsBlocks or sends it
// with a nonce gap: a queued transaction is never mined.
var cases = []struct {
	name string
	run  func(t *testing.T, bd bundle)
}{
	{"SentTransactionIsMinedWithSuccessReceipt", testSentTransactionIsMinedWithSuccessReceipt},
	{"RevertedCallHasRevertedReceipt", testRevertedCallHasRevertedReceipt},
	{"SendingTheSameBytesAgainIsAccepted", testSendingTheSameBytesAgainIsAccepted},
	{"NonceTooLowIsItsOwnResult", testNonceTooLowIsItsOwnResult},
	{"UnderpricedReplacementAsksForABump", testUnderpricedReplacementAsksForABump},
	{"InsufficientFundsRecyclesTheNonce", testInsufficientFundsRecyclesTheNonce},
	{"IntrinsicGasTooLowRecyclesTheNonce", testIntrinsicGasTooLowRecyclesTheNonce},
	{"ExceedsBlockGasLimitRecyclesTheNonce", testExceedsBlockGasLimitRecyclesTheNonce},
	{"RevertingEstimateIsTheNodesVerdict", testRevertingEstimateIsTheNodesVerdict},
	{"CallReturnsItsOutputAndARevertItsData", testCallReturnsItsOutputAndARevertItsData},
	{"TransportFailuresAreIndeterminate", testTransportFailuresAreIndeterminate},
	{"TxsAtNonceReadsTheBlockThatHoldsANonce", testTxsAtNonceReadsTheBlockThatHoldsANonce},
}

// revertingInit deploys a contract whose code is PUSH1 0 PUSH1 0 REVERT: every
// call to it reverts.
var revertingInit = common.FromHex("0x6005600c60003960056000f3" + "60006000fd")

// bundle is what one case gets: a ledger over its backend, and a key of its
// own holding 100 ether that nothing else sends from.
type bundle struct {
	l       *evm.Ledger
	key     *ecdsa.PrivateKey
	from    ledger.Address
	chainID *big.Int
	// mine returns once tx is in a block, and that block's number.
	mine func(t *testing.T, tx *types.Transaction) uint64
	// holdsBlocks: no block is made until mine is called, so the state
	// between sending and mining can be checked (the simulated backend).
	holdsBlocks bool
}

var hundredEther = new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))

func TestLedger_Simulated(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setupSimulated(t))
		})
	}
}

// TestLedger_Geth runs the cases against one real geth node (each case with
// its own funded key), plus what only a node behind a network can show.
func TestLedger_Geth(t *testing.T) {
	t.Parallel()
	node := testgeth.Start(t)
	l, err := evm.Dial(context.Background(), node.URL, evm.Config{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	setup := func(t *testing.T) bundle {
		t.Helper()
		key := newKey(t)
		node.Fund(t, crypto.PubkeyToAddress(key.PublicKey), hundredEther)
		return bundle{
			l: l, key: key, from: ledger.Address(crypto.PubkeyToAddress(key.PublicKey)), chainID: node.ChainID,
			mine: func(t *testing.T, tx *types.Transaction) uint64 {
				t.Helper()
				return node.WaitMined(t, tx.Hash()).BlockNumber.Uint64()
			},
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setup(t))
		})
	}
	t.Run("LostResponseIsIndeterminateAndTheTransactionIsMined", func(t *testing.T) {
		t.Parallel()
		testLostResponseIsIndeterminateAndTheTransactionIsMined(t, setup(t), node)
	})
}

// TestLedger_Anvil runs the cases against one real anvil (Foundry's node),
// which answers with other codes and texts than geth (-32003 "nonce too
// low", "transaction already imported", "Insufficient funds for gas * price
// + value"), plus the refusal only anvil makes at send: a fee cap below the
// block's base fee.
func TestLedger_Anvil(t *testing.T) {
	t.Parallel()
	node := testanvil.Start(t)
	l, err := evm.Dial(context.Background(), node.URL, evm.Config{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	setup := func(t *testing.T) bundle {
		t.Helper()
		key := newKey(t)
		node.SetBalance(t, crypto.PubkeyToAddress(key.PublicKey), hundredEther)
		return bundle{
			l: l, key: key, from: ledger.Address(crypto.PubkeyToAddress(key.PublicKey)), chainID: node.ChainID,
			mine: func(t *testing.T, tx *types.Transaction) uint64 {
				t.Helper()
				return node.WaitMined(t, tx.Hash()).BlockNumber.Uint64()
			},
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setup(t))
		})
	}
	t.Run("FeeCapBelowBaseFeeRecyclesTheNonce", func(t *testing.T) {
		t.Parallel()
		bd := setup(t)
		to := common.Address{0xaa}
		tx := bd.sign(t, bd.key, 0, &to, 1, params.TxGas, ledger.Fees{TipCap: big.NewInt(1), FeeCap: big.NewInt(1)}, nil)
		wantResult(t, bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, tx)), ledger.SendRejected)
	})
}

func setupSimulated(t *testing.T) bundle {
	t.Helper()
	key := newKey(t)
	from := crypto.PubkeyToAddress(key.PublicKey)
	b := simulated.NewBackend(types.GenesisAlloc{from: {Balance: hundredEther}})
	t.Cleanup(func() { _ = b.Close() })
	l := evm.New(b.Client(), evm.Config{CallTimeout: 5 * time.Second})
	id, err := l.ChainID(context.Background())
	if err != nil {
		t.Fatalf("ChainID: %v", err)
	}
	return bundle{
		l: l, key: key, from: ledger.Address(from), chainID: id, holdsBlocks: true,
		mine: func(t *testing.T, _ *types.Transaction) uint64 {
			t.Helper()
			head, err := b.Client().HeaderByHash(context.Background(), b.Commit())
			if err != nil {
				t.Fatal(err)
			}
			return head.Number.Uint64()
		},
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// newAddress is an address no other case pays.
func newAddress(t *testing.T) common.Address {
	return crypto.PubkeyToAddress(newKey(t).PublicKey)
}

// sign builds and signs an EIP-1559 transaction from key.
func (bd bundle) sign(t *testing.T, key *ecdsa.PrivateKey, nonce uint64, to *common.Address, value int64, gas uint64, fees ledger.Fees, data []byte) *types.Transaction {
	t.Helper()
	return ledgertest.SignTx(t, key, &types.DynamicFeeTx{
		ChainID: bd.chainID, Nonce: nonce, GasTipCap: fees.TipCap, GasFeeCap: fees.FeeCap,
		Gas: gas, To: to, Value: big.NewInt(value), Data: data,
	})
}

func (bd bundle) fees(t *testing.T) ledger.Fees {
	t.Helper()
	f, err := bd.l.SuggestFees(context.Background())
	if err != nil {
		t.Fatalf("SuggestFees: %v", err)
	}
	if f.TipCap == nil || f.FeeCap == nil || f.FeeCap.Cmp(f.TipCap) < 0 {
		t.Fatalf("SuggestFees = %+v, want a fee cap at least the tip", f)
	}
	return f
}

// wantResult checks a send's result and logs the node's words, so the test
// log shows what each backend answered.
func wantResult(t *testing.T, err error, want ledger.SendResult) {
	t.Helper()
	if got := ledger.SendResultOf(err); got != want {
		t.Fatalf("send result = %s (%v), want %s", got, err, want)
	}
	if want != ledger.SendAccepted && ledger.ClassOf(err) != want.Class() {
		t.Fatalf("class = %s, want %s", ledger.ClassOf(err), want.Class())
	}
	t.Logf("%s: %v", want, err)
}

func testSentTransactionIsMinedWithSuccessReceipt(t *testing.T, bd bundle) {
	ctx := context.Background()
	to := newAddress(t)
	gas, err := bd.l.EstimateGas(ctx, ledger.CallMsg{From: bd.from, To: (*ledger.Address)(&to), Value: big.NewInt(1)})
	if err != nil || gas != params.TxGas {
		t.Fatalf("EstimateGas = %d, %v; want %d", gas, err, params.TxGas)
	}
	tx := bd.sign(t, bd.key, 0, &to, 1000, gas, bd.fees(t), nil)
	if err := bd.l.SendRawTransaction(ctx, ledgertest.RawTx(t, tx)); err != nil {
		t.Fatalf("SendRawTransaction: %v", err)
	}
	// The pool promotes a new transaction in its own goroutine (go-ethereum
	// adds it to the pool without waiting for the promotion): the pending
	// nonce follows within moments, not necessarily at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := bd.l.PendingNonceAt(ctx, bd.from)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PendingNonceAt = %d, %v; want 1", n, err)
		}
		time.Sleep(10 * time.Millisecond) // the pool's own goroutine: nothing to drive
	}
	if bd.holdsBlocks {
		if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 0 {
			t.Fatalf("NonceAt before mining = %d, %v; want 0", n, err)
		}
		// Before mining geth answers null or "transaction indexing is in
		// progress"; either way, never a receipt.
		r, err := bd.l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
		if r.Found {
			t.Fatalf("receipt before mining = %+v, %v; want none", r, err)
		}
	}
	block := bd.mine(t, tx)
	r, err := bd.l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
	if err != nil || !r.Found || r.Status != ledger.ReceiptSuccess || r.BlockNumber != block || r.GasUsed != params.TxGas {
		t.Fatalf("receipt after mining = %+v, %v; want found, success, block %d", r, err, block)
	}
	if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 1 {
		t.Fatalf("NonceAt after mining = %d, %v; want 1", n, err)
	}
	bal, err := bd.l.BalanceAt(ctx, ledger.Address(to))
	if err != nil || bal.Int64() != 1000 {
		t.Fatalf("BalanceAt(to) = %v, %v; want 1000", bal, err)
	}
}

func testRevertedCallHasRevertedReceipt(t *testing.T, bd bundle) {
	ctx := context.Background()
	fees := bd.fees(t)
	deploy := bd.sign(t, bd.key, 0, nil, 0, 200_000, fees, revertingInit)
	if err := bd.l.SendRawTransaction(ctx, ledgertest.RawTx(t, deploy)); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	bd.mine(t, deploy)
	r, err := bd.l.TransactionReceipt(ctx, ledger.TxHash(deploy.Hash()))
	if err != nil || r.Status != ledger.ReceiptSuccess {
		t.Fatalf("deploy receipt = %+v, %v", r, err)
	}
	contract := crypto.CreateAddress(common.Address(bd.from), 0)
	call := bd.sign(t, bd.key, 1, &contract, 0, 100_000, fees, []byte{1, 2, 3, 4})
	if err := bd.l.SendRawTransaction(ctx, ledgertest.RawTx(t, call)); err != nil {
		t.Fatalf("call: %v", err)
	}
	block := bd.mine(t, call)
	r, err = bd.l.TransactionReceipt(ctx, ledger.TxHash(call.Hash()))
	if err != nil || !r.Found || r.Status != ledger.ReceiptReverted || r.BlockNumber != block {
		t.Fatalf("call receipt = %+v, %v; want found, reverted, block %d", r, err, block)
	}
	if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 2 {
		t.Fatalf("a reverted call uses its nonce: NonceAt = %d, %v; want 2", n, err)
	}
}

func testSendingTheSameBytesAgainIsAccepted(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	// Nonce 1 with nonce 0 unsent: the transaction waits in the pool's queue,
	// so no block takes it between the two sends.
	tx := ledgertest.RawTx(t, bd.sign(t, bd.key, 1, &to, 1, params.TxGas, bd.fees(t), nil))
	if err := bd.l.SendRawTransaction(context.Background(), tx); err != nil {
		t.Fatalf("first send: %v", err)
	}
	// geth answers "already known"; that is a success.
	err := bd.l.SendRawTransaction(context.Background(), tx)
	wantResult(t, err, ledger.SendAccepted)
}

func testNonceTooLowIsItsOwnResult(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	fees := bd.fees(t)
	first := bd.sign(t, bd.key, 0, &to, 1, params.TxGas, fees, nil)
	if err := bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, first)); err != nil {
		t.Fatal(err)
	}
	bd.mine(t, first)
	other := ledgertest.RawTx(t, bd.sign(t, bd.key, 0, &to, 2, params.TxGas, fees, nil))
	// geth's pool drops the mined transaction asynchronously after the new
	// head; until then it still answers "replacement transaction underpriced".
	deadline := time.Now().Add(10 * time.Second)
	err := bd.l.SendRawTransaction(context.Background(), other)
	for ledger.SendResultOf(err) == ledger.SendUnderpriced && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the pool's own goroutine: nothing to drive
		err = bd.l.SendRawTransaction(context.Background(), other)
	}
	wantResult(t, err, ledger.SendNonceTooLow)
}

func testUnderpricedReplacementAsksForABump(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	fees := bd.fees(t)
	// Nonce 1 with nonce 0 unsent: queued, so never mined under the test.
	if err := bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, bd.sign(t, bd.key, 1, &to, 1, params.TxGas, fees, nil))); err != nil {
		t.Fatal(err)
	}
	same := bd.sign(t, bd.key, 1, &to, 2, params.TxGas, fees, nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, same)), ledger.SendUnderpriced)

	bumped := ledger.Fees{TipCap: new(big.Int).Mul(fees.TipCap, big.NewInt(2)), FeeCap: new(big.Int).Mul(fees.FeeCap, big.NewInt(2))}
	replacement := bd.sign(t, bd.key, 1, &to, 3, params.TxGas, bumped, nil)
	if err := bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, replacement)); err != nil {
		t.Fatalf("a replacement with doubled fees: %v", err)
	}
}

func testInsufficientFundsRecyclesTheNonce(t *testing.T, bd bundle) {
	poor := newKey(t)
	to := common.Address{0xaa}
	tx := bd.sign(t, poor, 0, &to, 1, params.TxGas, bd.fees(t), nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, tx)), ledger.SendRejected)
}

func testIntrinsicGasTooLowRecyclesTheNonce(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	tx := bd.sign(t, bd.key, 0, &to, 1, 20_000, bd.fees(t), nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, tx)), ledger.SendRejected)
}

func testExceedsBlockGasLimitRecyclesTheNonce(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	tx := bd.sign(t, bd.key, 0, &to, 1, 1_000_000_000, bd.fees(t), nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, tx)), ledger.SendRejected)
}

// testRevertingEstimateIsTheNodesVerdict: a transaction that would revert is
// the node's verdict on it (Deterministic), which may end a task in error.
func testRevertingEstimateIsTheNodesVerdict(t *testing.T, bd bundle) {
	_, err := bd.l.EstimateGas(context.Background(), ledger.CallMsg{From: bd.from, Data: common.FromHex("0x60006000fd")})
	if !ledger.CallRefused(err) {
		t.Fatalf("EstimateGas of a reverting creation = %v (class %s); want the node's verdict (deterministic)", err, ledger.ClassOf(err))
	}
	t.Logf("verdict: %v", err)
}

// testCallReturnsItsOutputAndARevertItsData: eth_call at the pending state
// and at a block returns what the code returned; a revert is the node's
// verdict and carries the revert data, for eth_call and eth_estimateGas
// alike, whatever the node's code and text for it. The calls create no
// contract: the data runs as init code.
func testCallReturnsItsOutputAndARevertItsData(t *testing.T, bd bundle) {
	ctx := context.Background()
	// PUSH1 0x2a PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN: returns 42 as a word.
	returns42 := common.FromHex("0x602a60005260206000f3")
	// PUSH4 0xcafebabe PUSH1 0xe0 SHL PUSH1 0 MSTORE PUSH1 4 PUSH1 0 REVERT:
	// reverts with the 4 bytes cafebabe.
	revertsCafebabe := common.FromHex("0x63cafebabe60e01b60005260046000fd")
	head, err := bd.l.HeadBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range []*uint64{nil, &head.Number} {
		out, err := bd.l.Call(ctx, ledger.CallMsg{From: bd.from, Data: returns42}, block)
		if err != nil || len(out) != 32 || out[31] != 42 {
			t.Fatalf("Call (block %v) = %x, %v; want the word 42", block, out, err)
		}
		_, err = bd.l.Call(ctx, ledger.CallMsg{From: bd.from, Data: revertsCafebabe, Gas: 100_000}, block)
		wantRevertData(t, "Call", err, "cafebabe")
	}
	_, err = bd.l.EstimateGas(ctx, ledger.CallMsg{From: bd.from, Data: revertsCafebabe})
	wantRevertData(t, "EstimateGas", err, "cafebabe")
}

func wantRevertData(t *testing.T, op string, err error, want string) {
	t.Helper()
	if !ledger.CallRefused(err) {
		t.Fatalf("%s of a revert = %v (class %s); want the node's verdict", op, err, ledger.ClassOf(err))
	}
	re, ok := ledger.RevertDataOf(err)
	if !ok || fmt.Sprintf("%x", re.Data) != want {
		t.Fatalf("%s's revert data = %+v (%v); want %s", op, re, err, want)
	}
	code := 0
	if rpcErr, ok := errors.AsType[rpc.Error](err); ok {
		code = rpcErr.ErrorCode()
	}
	t.Logf("%s: code %d: %v", op, code, err)
}

// testTransportFailuresAreIndeterminate: a proxy's 502 and a node that does
// not answer in time may both have taken the transaction.
func testTransportFailuresAreIndeterminate(t *testing.T, bd bundle) {
	to := common.Address{0xaa}
	tx := ledgertest.RawTx(t, bd.sign(t, bd.key, 0, &to, 1, params.TxGas, bd.fees(t), nil))

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream: nonce too low", http.StatusBadGateway)
	}))
	t.Cleanup(bad.Close)
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(release) }) // runs first: unblock the handler so Close returns

	for _, url := range []string{bad.URL, stuck.URL, "http://127.0.0.1:1"} {
		l, err := evm.Dial(context.Background(), url, evm.Config{CallTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, l.SendRawTransaction(context.Background(), tx), ledger.SendIndeterminate)
		l.Close()
	}

	// A rate limiter in front of the node said no: busy, not refused.
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
	}))
	t.Cleanup(limited.Close)
	l, err := evm.Dial(context.Background(), limited.URL, evm.Config{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wantResult(t, l.SendRawTransaction(context.Background(), tx), ledger.SendBusy)
}

// testLostResponseIsIndeterminateAndTheTransactionIsMined: the node takes the
// transaction but its answer never reaches the adapter (a proxy cuts the
// connection). The send is indeterminate — and the chain mines it, which is
// why an indeterminate nonce must never be given to another transaction.
func testLostResponseIsIndeterminateAndTheTransactionIsMined(t *testing.T, bd bundle, node *testgeth.Node) {
	// What the node answered, which the adapter never sees: the premise
	// (the node took the transaction) is checked, not assumed.
	upstream := make(chan string, 10)
	cutter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		resp, err := http.Post(node.URL, "application/json", bytes.NewReader(body))
		if err == nil {
			answer, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			upstream <- fmt.Sprintf("%s %s", resp.Status, answer)
		} else {
			upstream <- err.Error()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(cutter.Close)
	l, err := evm.Dial(context.Background(), cutter.URL, evm.Config{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)

	to := newAddress(t)
	tx := bd.sign(t, bd.key, 0, &to, 7, params.TxGas, bd.fees(t), nil)
	wantResult(t, l.SendRawTransaction(context.Background(), ledgertest.RawTx(t, tx)), ledger.SendIndeterminate)
	if answer := <-upstream; !strings.Contains(answer, tx.Hash().Hex()) {
		t.Fatalf("the node did not take the transaction %s: it answered %s", tx.Hash().Hex(), answer)
	}
	block := bd.mine(t, tx)
	r, err := bd.l.TransactionReceipt(context.Background(), ledger.TxHash(tx.Hash()))
	if err != nil || !r.Found || r.Status != ledger.ReceiptSuccess || r.BlockNumber != block {
		t.Fatalf("receipt of the transaction whose answer was lost = %+v, %v; want mined with success in block %d", r, err, block)
	}
}

// TxsAtNonce finds, from blocks alone, the block that holds each nonce, and
// gives the account's transactions in it with their receipts; a nonce the
// chain has not reached is not found.
func testTxsAtNonceReadsTheBlockThatHoldsANonce(t *testing.T, bd bundle) {
	ctx := context.Background()
	to := newAddress(t)
	fees := bd.fees(t)
	var blocks []uint64
	var hashes []common.Hash
	for nonce := range uint64(3) {
		tx := bd.sign(t, bd.key, nonce, &to, 1, params.TxGas, fees, nil)
		if err := bd.l.SendRawTransaction(ctx, ledgertest.RawTx(t, tx)); err != nil {
			t.Fatalf("SendRawTransaction: %v", err)
		}
		blocks = append(blocks, bd.mine(t, tx))
		hashes = append(hashes, tx.Hash())
	}
	for nonce := range uint64(3) {
		txs, found, err := bd.l.TxsAtNonce(ctx, bd.from, nonce)
		if err != nil || !found {
			t.Fatalf("TxsAtNonce(%d) = %v, %v, %v; want found", nonce, txs, found, err)
		}
		var got *ledger.NonceTx
		for i := range txs {
			if txs[i].Nonce == nonce {
				got = &txs[i]
			}
		}
		if got == nil || common.Hash(got.Hash) != hashes[nonce] || got.Receipt.BlockNumber != blocks[nonce] ||
			got.Receipt.Status != ledger.ReceiptSuccess || !got.Receipt.Found {
			t.Fatalf("TxsAtNonce(%d) = %+v; want %s in block %d", nonce, txs, hashes[nonce].Hex(), blocks[nonce])
		}
		if r, err := bd.l.TransactionReceipt(ctx, got.Hash); err != nil || r.BlockHash != got.Receipt.BlockHash {
			t.Fatalf("the receipt by hash is in block %s, TxsAtNonce's in %s (%v)", r.BlockHash.Hex(), got.Receipt.BlockHash.Hex(), err)
		}
	}
	if txs, found, err := bd.l.TxsAtNonce(ctx, bd.from, 3); err != nil || found {
		t.Fatalf("TxsAtNonce(3) = %v, %v, %v; want not found", txs, found, err)
	}
	// TxsInBlock reads the same from each block, with the signed bytes.
	for nonce := range uint64(3) {
		txs, found, err := bd.l.TxsInBlock(ctx, bd.from, blocks[nonce])
		if err != nil || !found {
			t.Fatalf("TxsInBlock(%d) = %v, %v, %v; want found", blocks[nonce], txs, found, err)
		}
		held := false
		for _, tx := range txs {
			var decoded types.Transaction
			if err := decoded.UnmarshalBinary(tx.Raw); err != nil || decoded.Hash() != common.Hash(tx.Hash) {
				t.Fatalf("TxsInBlock(%d): the bytes of %s do not decode to it (%v)", blocks[nonce], common.Hash(tx.Hash).Hex(), err)
			}
			held = held || tx.Nonce == nonce && common.Hash(tx.Hash) == hashes[nonce] && tx.Receipt.BlockNumber == blocks[nonce]
		}
		if !held {
			t.Fatalf("TxsInBlock(%d) = %+v; want nonce %d's %s", blocks[nonce], txs, nonce, hashes[nonce].Hex())
		}
	}
	head, err := bd.l.HeadBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if txs, found, err := bd.l.TxsInBlock(ctx, bd.from, head.Number+1000); err != nil || found {
		t.Fatalf("TxsInBlock above the head = %v, %v, %v; want not found", txs, found, err)
	}
}
