package evmsim_test

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

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

// postJSON posts body to url as JSON and returns the answer's status and
// body.
func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The server is go-ethereum's rpc.Server behind the fault middleware: JSON-RPC
// over POST only, a request without "jsonrpc":"2.0" is invalid, and a
// transient fault is the whole HTTP answer.
func TestServer_IsGethsJSONRPCOverPOSTWithTransientFaultsAs503(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{TransientRate: 1})
	srv := httptest.NewServer(evmsim.NewServer(bd.l, nil))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET = %d, want 405", resp.StatusCode)
	}
	if code, body := postJSON(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`); code != http.StatusOK || !strings.Contains(body, `"result":"0x539"`) {
		t.Fatalf("eth_chainId = %d %s", code, body)
	}
	if _, body := postJSON(t, srv.URL, `{"id":1,"method":"eth_chainId"}`); !strings.Contains(body, `"code":-32600`) {
		t.Fatalf(`a request without "jsonrpc":"2.0" = %s, want -32600`, body)
	}
	send := `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["` + hexutil.Encode(sign(t, bd.key, 0, 1, 3, 1, nil)) + `"]}`
	if code, body := postJSON(t, srv.URL, send); code != http.StatusServiceUnavailable || !strings.Contains(body, evmsim.ErrTransient) {
		t.Fatalf("a send that draws a transient fault = %d %s, want 503 %q", code, body, evmsim.ErrTransient)
	}
}

// A lost response cuts the connection of the whole request: a send after it
// in the same batch is not made, as the hand-written server stopped there.
func TestServer_ALostResponseEndsItsBatch(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{LostResponseRate: 1})
	srv := httptest.NewServer(evmsim.NewServer(bd.l, nil))
	t.Cleanup(srv.Close)
	c, err := rpc.DialHTTP(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	batch := []rpc.BatchElem{
		{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(sign(t, bd.key, 0, 1, 3, 1, nil))}, Result: new(any)},
		{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(sign(t, bd.key, 1, 1, 3, 1, nil))}, Result: new(any)},
	}
	if err := c.BatchCallContext(context.Background(), batch); err == nil {
		t.Fatalf("a batch whose send lost its response was answered: %+v", batch)
	}
	if _, pending := nonces(t, bd.l, bd.from); pending != 1 {
		t.Fatalf("pending nonce after the batch = %d, want 1 (the first send taken, the second not made)", pending)
	}
}

// The blocks a client reads, in process and through the evm adapter over
// HTTP, are the chain's: a block's hash is its header's (a receipt's block
// is the block at its number), TxsAtNonce finds each nonce's block by the
// account's nonce at past blocks, and after a reorg both name the block of
// the new chain.
func TestServer_TxsAtNonceAndBlockHashesFollowTheChainThroughAReorg(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{BlockPeriod: time.Second})
	over := serve(t, bd)
	ctx := context.Background()
	var hashes []ledger.TxHash
	for nonce := range uint64(3) {
		tx := sign(t, bd.key, nonce, 1, 3, 1, nil)
		if err := bd.l.SendRawTransaction(ctx, tx); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hashOf(t, tx))
		bd.clock.Advance(time.Second)
	}
	check := func(when string) {
		t.Helper()
		for _, l := range []ledger.WalletLedger{bd.l, over} {
			for nonce, h := range hashes {
				r, err := l.TransactionReceipt(ctx, h)
				if err != nil || !r.Found {
					t.Fatalf("%s: receipt of nonce %d = %+v, %v", when, nonce, r, err)
				}
				b, found, err := l.BlockAt(ctx, r.BlockNumber)
				if err != nil || !found || b.Hash != r.BlockHash {
					t.Fatalf("%s: block %d = %+v, %v, %v; the receipt says %s", when, r.BlockNumber, b, found, err, r.BlockHash.Hex())
				}
				txs, found, err := l.TxsAtNonce(ctx, bd.from, uint64(nonce))
				var got ledger.NonceTx
				for _, tx := range txs {
					if tx.Nonce == uint64(nonce) {
						got = tx
					}
				}
				if err != nil || !found || got.Hash != h || got.Receipt.BlockHash != r.BlockHash {
					t.Fatalf("%s: TxsAtNonce(%d) = %+v, %v, %v; want %s in %s", when, nonce, txs, found, err, h.Hex(), r.BlockHash.Hex())
				}
			}
			if _, found, err := l.TxsAtNonce(ctx, bd.from, 3); err != nil || found {
				t.Fatalf("%s: TxsAtNonce(3) found %v, %v", when, found, err)
			}
		}
	}
	check("before the reorg")
	before := bd.l.Head()
	if _, err := bd.l.Reorg(2); err != nil {
		t.Fatal(err)
	}
	bd.clock.Advance(2 * time.Second) // the two blocks mined again, with their transactions
	if after, _ := bd.l.BlockByNumber(before.Number); after.Hash == before.Hash {
		t.Fatal("the reorg left the head's hash")
	}
	check("after the reorg")
}

// TestServer_ACallWithTheRevertMarkerRevertsWithTheRestAsItsData: the
// simulated chain runs no code, so a call reverts only by the marker, with
// the rest of its data as the revert data, in process and over HTTP (code
// 3, as geth answers); any other call succeeds and returns nothing.
func TestServer_ACallWithTheRevertMarkerRevertsWithTheRestAsItsData(t *testing.T) {
	t.Parallel()
	bd := setup(t, evmsim.Config{})
	toAddr := ledger.Address(to)
	for name, l := range map[string]ledger.WalletLedger{"in process": bd.l, "over HTTP": serve(t, bd)} {
		out, err := l.Call(context.Background(), ledger.CallMsg{From: bd.from, To: &toAddr, Data: []byte{1, 2}}, nil)
		if err != nil || len(out) != 0 {
			t.Fatalf("%s: Call = %x, %v; want success with no output", name, out, err)
		}
		data := append(append([]byte(nil), evmsim.RevertMarker...), 0xca, 0xfe)
		_, err = l.Call(context.Background(), ledger.CallMsg{From: bd.from, To: &toAddr, Data: data}, nil)
		re, ok := ledger.RevertDataOf(err)
		if !ledger.CallRefused(err) || !ok || fmt.Sprintf("%x", re.Data) != "cafe" {
			t.Fatalf("%s: Call with the marker = %v (revert data %+v); want a verdict with data cafe", name, err, re)
		}
	}
}
