package evm_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
)

// revertingInit deploys a contract whose code is PUSH1 0 PUSH1 0 REVERT: every
// call to it reverts.
var revertingInit = common.FromHex("0x6005600c60003960056000f3" + "60006000fd")

type bundle struct {
	backend *simulated.Backend
	l       *evm.Ledger
	key     *ecdsa.PrivateKey
	from    ledger.Address
	chainID *big.Int
}

func setup(t *testing.T) bundle {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	funds := new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))
	b := simulated.NewBackend(types.GenesisAlloc{from: {Balance: funds}})
	t.Cleanup(func() { _ = b.Close() })
	l := evm.New(b.Client(), evm.Config{CallTimeout: 5 * time.Second})
	id, err := l.ChainID(context.Background())
	if err != nil {
		t.Fatalf("ChainID: %v", err)
	}
	return bundle{backend: b, l: l, key: key, from: ledger.Address(from), chainID: id}
}

// sign builds and signs an EIP-1559 transaction from key.
func (bd bundle) sign(t *testing.T, key *ecdsa.PrivateKey, nonce uint64, to *common.Address, value int64, gas uint64, fees ledger.Fees, data []byte) *types.Transaction {
	t.Helper()
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(bd.chainID), &types.DynamicFeeTx{
		ChainID: bd.chainID, Nonce: nonce, GasTipCap: fees.TipCap, GasFeeCap: fees.FeeCap,
		Gas: gas, To: to, Value: big.NewInt(value), Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func raw(t *testing.T, tx *types.Transaction) []byte {
	t.Helper()
	b, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
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

func wantResult(t *testing.T, err error, want ledger.SendResult) {
	t.Helper()
	if got := ledger.SendResultOf(err); got != want {
		t.Fatalf("send result = %s (%v), want %s", got, err, want)
	}
	if want != ledger.SendAccepted && ledger.ClassOf(err) != want.Class() {
		t.Fatalf("class = %s, want %s", ledger.ClassOf(err), want.Class())
	}
}

func TestLedger_SentTransactionIsMinedWithSuccessReceipt(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	ctx := context.Background()
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	gas, err := bd.l.EstimateGas(ctx, ledger.CallMsg{From: bd.from, To: (*ledger.Address)(&to), Value: big.NewInt(1)})
	if err != nil || gas != params.TxGas {
		t.Fatalf("EstimateGas = %d, %v; want %d", gas, err, params.TxGas)
	}
	tx := bd.sign(t, bd.key, 0, &to, 1000, gas, bd.fees(t), nil)
	if err := bd.l.SendRawTransaction(ctx, raw(t, tx)); err != nil {
		t.Fatalf("SendRawTransaction: %v", err)
	}
	if n, err := bd.l.PendingNonceAt(ctx, bd.from); err != nil || n != 1 {
		t.Fatalf("PendingNonceAt = %d, %v; want 1", n, err)
	}
	if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 0 {
		t.Fatalf("NonceAt before mining = %d, %v; want 0", n, err)
	}
	// Before mining geth answers null or "transaction indexing is in
	// progress"; either way, never a receipt.
	r, err := bd.l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
	if r.Found {
		t.Fatalf("receipt before mining = %+v, %v; want none", r, err)
	}
	bd.backend.Commit()
	r, err = bd.l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
	if err != nil || !r.Found || r.Status != ledger.ReceiptSuccess || r.BlockNumber != 1 || r.GasUsed != params.TxGas {
		t.Fatalf("receipt after mining = %+v, %v; want found, success, block 1", r, err)
	}
	if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 1 {
		t.Fatalf("NonceAt after mining = %d, %v; want 1", n, err)
	}
	bal, err := bd.l.BalanceAt(ctx, ledger.Address(to))
	if err != nil || bal.Int64() != 1000 {
		t.Fatalf("BalanceAt(to) = %v, %v; want 1000", bal, err)
	}
}

func TestLedger_RevertedCallHasRevertedReceipt(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	ctx := context.Background()
	fees := bd.fees(t)
	deploy := bd.sign(t, bd.key, 0, nil, 0, 200_000, fees, revertingInit)
	if err := bd.l.SendRawTransaction(ctx, raw(t, deploy)); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	bd.backend.Commit()
	r, err := bd.l.TransactionReceipt(ctx, ledger.TxHash(deploy.Hash()))
	if err != nil || r.Status != ledger.ReceiptSuccess {
		t.Fatalf("deploy receipt = %+v, %v", r, err)
	}
	contract := crypto.CreateAddress(common.Address(bd.from), 0)
	call := bd.sign(t, bd.key, 1, &contract, 0, 100_000, fees, []byte{1, 2, 3, 4})
	if err := bd.l.SendRawTransaction(ctx, raw(t, call)); err != nil {
		t.Fatalf("call: %v", err)
	}
	bd.backend.Commit()
	r, err = bd.l.TransactionReceipt(ctx, ledger.TxHash(call.Hash()))
	if err != nil || !r.Found || r.Status != ledger.ReceiptReverted || r.BlockNumber != 2 {
		t.Fatalf("call receipt = %+v, %v; want found, reverted, block 2", r, err)
	}
	if n, err := bd.l.NonceAt(ctx, bd.from); err != nil || n != 2 {
		t.Fatalf("a reverted call uses its nonce: NonceAt = %d, %v; want 2", n, err)
	}
}

func TestLedger_SendingTheSameBytesAgainIsAccepted(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	to := common.Address{0xaa}
	tx := raw(t, bd.sign(t, bd.key, 0, &to, 1, params.TxGas, bd.fees(t), nil))
	if err := bd.l.SendRawTransaction(context.Background(), tx); err != nil {
		t.Fatalf("first send: %v", err)
	}
	// geth answers "already known"; that is a success.
	wantResult(t, bd.l.SendRawTransaction(context.Background(), tx), ledger.SendAccepted)
}

func TestLedger_NonceTooLowIsItsOwnResult(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	to := common.Address{0xaa}
	fees := bd.fees(t)
	if err := bd.l.SendRawTransaction(context.Background(), raw(t, bd.sign(t, bd.key, 0, &to, 1, params.TxGas, fees, nil))); err != nil {
		t.Fatal(err)
	}
	bd.backend.Commit()
	other := raw(t, bd.sign(t, bd.key, 0, &to, 2, params.TxGas, fees, nil))
	// geth's pool drops the mined transaction asynchronously after the new
	// head; until then it still answers "replacement transaction underpriced".
	deadline := time.Now().Add(10 * time.Second)
	err := bd.l.SendRawTransaction(context.Background(), other)
	for ledger.SendResultOf(err) == ledger.SendUnderpriced && time.Now().Before(deadline) {
		runtime.Gosched()
		err = bd.l.SendRawTransaction(context.Background(), other)
	}
	wantResult(t, err, ledger.SendNonceTooLow)
}

func TestLedger_UnderpricedReplacementAsksForABump(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	to := common.Address{0xaa}
	fees := bd.fees(t)
	if err := bd.l.SendRawTransaction(context.Background(), raw(t, bd.sign(t, bd.key, 0, &to, 1, params.TxGas, fees, nil))); err != nil {
		t.Fatal(err)
	}
	same := bd.sign(t, bd.key, 0, &to, 2, params.TxGas, fees, nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), raw(t, same)), ledger.SendUnderpriced)

	bumped := ledger.Fees{TipCap: new(big.Int).Mul(fees.TipCap, big.NewInt(2)), FeeCap: new(big.Int).Mul(fees.FeeCap, big.NewInt(2))}
	replacement := bd.sign(t, bd.key, 0, &to, 3, params.TxGas, bumped, nil)
	if err := bd.l.SendRawTransaction(context.Background(), raw(t, replacement)); err != nil {
		t.Fatalf("a replacement with doubled fees: %v", err)
	}
}

func TestLedger_InsufficientFundsRecyclesTheNonce(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	poor, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	to := common.Address{0xaa}
	tx := bd.sign(t, poor, 0, &to, 1, params.TxGas, bd.fees(t), nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), raw(t, tx)), ledger.SendRejected)
}

func TestLedger_IntrinsicGasTooLowRecyclesTheNonce(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	to := common.Address{0xaa}
	tx := bd.sign(t, bd.key, 0, &to, 1, 20_000, bd.fees(t), nil)
	wantResult(t, bd.l.SendRawTransaction(context.Background(), raw(t, tx)), ledger.SendRejected)
}

// TestLedger_TransportFailuresAreIndeterminate: a proxy's 502 and a node that
// does not answer in time may both have taken the transaction.
func TestLedger_TransportFailuresAreIndeterminate(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	to := common.Address{0xaa}
	tx := raw(t, bd.sign(t, bd.key, 0, &to, 1, params.TxGas, bd.fees(t), nil))

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
}
