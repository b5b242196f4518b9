package evmsim_test

import (
	"context"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
)

// serve runs the evm adapter against bd's ledger served over HTTP.
func serve(t *testing.T, bd bundle) *evm.Ledger {
	t.Helper()
	srv := httptest.NewServer(evmsim.NewServer(bd.l, nil))
	t.Cleanup(srv.Close)
	l, err := evm.Dial(context.Background(), srv.URL, evm.Config{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func TestServer_EVMAdapterWorksUnchanged(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{BlockPeriod: time.Second})
	l := serve(t, bd)
	ctx := context.Background()
	if id, err := l.ChainID(ctx); err != nil || id.Int64() != 1337 {
		t.Fatalf("ChainID = %v, %v", id, err)
	}
	fees, err := l.SuggestFees(ctx)
	if err != nil || fees.TipCap.Int64() != params.GWei || fees.FeeCap.Int64() != 3*params.GWei {
		t.Fatalf("SuggestFees = %+v, %v; want tip 1 gwei, cap 3 gwei", fees, err)
	}
	toAddr := ledger.Address(to)
	if g, err := l.EstimateGas(ctx, ledger.CallMsg{From: bd.from, To: &toAddr, Value: big.NewInt(1)}); err != nil || g != params.TxGas {
		t.Fatalf("EstimateGas = %d, %v", g, err)
	}
	tx := sign(t, bd.key, 0, 1, 3, 1000, nil)
	if err := l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := l.SendRawTransaction(ctx, tx); err != nil {
		t.Fatalf("already known is a success: %v", err)
	}
	if n, err := l.PendingNonceAt(ctx, bd.from); err != nil || n != 1 {
		t.Fatalf("PendingNonceAt = %d, %v", n, err)
	}
	if r, err := l.TransactionReceipt(ctx, hashOf(t, tx)); err != nil || r.Found {
		t.Fatalf("receipt before the block = %+v, %v", r, err)
	}
	bd.clock.Advance(time.Second)
	r, err := l.TransactionReceipt(ctx, hashOf(t, tx))
	if err != nil || !r.Found || r.Status != ledger.ReceiptSuccess || r.BlockNumber != 1 {
		t.Fatalf("receipt = %+v, %v; want success in block 1", r, err)
	}
	if n, err := l.NonceAt(ctx, bd.from); err != nil || n != 1 {
		t.Fatalf("NonceAt = %d, %v", n, err)
	}
	if b, err := l.BalanceAt(ctx, toAddr); err != nil || b.Int64() != 1000 {
		t.Fatalf("BalanceAt = %v, %v", b, err)
	}
	wantResult(t, l.SendRawTransaction(ctx, sign(t, bd.key, 0, 1, 3, 2, nil)), ledger.SendNonceTooLow)
	if err := l.SendRawTransaction(ctx, sign(t, bd.key, 1, 1, 3, 2, nil)); err != nil {
		t.Fatal(err)
	}
	wantResult(t, l.SendRawTransaction(ctx, sign(t, bd.key, 1, 1, 3, 3, nil)), ledger.SendUnderpriced)
	wantResult(t, l.SendRawTransaction(ctx, sign(t, bd.key, 2, 1, 1_000_000_000_000, 1, nil)), ledger.SendRejected)

	revert := sign(t, bd.key, 2, 1, 3, 0, evmsim.RevertMarker)
	if err := l.SendRawTransaction(ctx, revert); err != nil {
		t.Fatal(err)
	}
	bd.clock.Advance(time.Second)
	if r, err := l.TransactionReceipt(ctx, hashOf(t, revert)); err != nil || r.Status != ledger.ReceiptReverted {
		t.Fatalf("receipt = %+v, %v; want reverted", r, err)
	}
}

func TestServer_FaultsAreIndeterminateOverHTTP(t *testing.T) {
	t.Parallel()
	lost := setup(t, evmsim.Config{LostResponseRate: 1})
	tx := sign(t, lost.key, 0, 1, 3, 1, nil)
	wantResult(t, serve(t, lost).SendRawTransaction(context.Background(), tx), ledger.SendIndeterminate)
	lost.l.Mine()
	if r := receipt(t, lost.l, hashOf(t, tx)); !r.Found {
		t.Fatal("the lost-response send was not taken")
	}

	transient := setup(t, evmsim.Config{TransientRate: 1})
	wantResult(t, serve(t, transient).SendRawTransaction(context.Background(), sign(t, transient.key, 0, 1, 3, 1, nil)), ledger.SendIndeterminate)
	if n, _ := transient.l.PendingNonceAt(context.Background(), transient.from); n != 0 {
		t.Fatalf("a transient failure took the transaction: pending nonce %d", n)
	}
}
