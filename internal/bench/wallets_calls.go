package bench

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// countingLedger is the lane's chain as the run hands it to the node: every
// call is counted and timed by method, so the summary can say how many
// round trips to the chain a task cost. The chains of a run over several
// share one callCounts.
type countingLedger struct {
	ledger.WalletLedger
	*callCounts
}

// callCounts are the calls counted by method.
type callCounts struct {
	mu    sync.Mutex
	calls map[string]*callStat
}

type callStat struct {
	n     int
	total time.Duration
}

func newCallCounts() *callCounts { return &callCounts{calls: map[string]*callStat{}} }

func newCountingLedger(l ledger.WalletLedger, counts *callCounts) *countingLedger {
	return &countingLedger{WalletLedger: l, callCounts: counts}
}

func (c *callCounts) count(method string, began time.Time) {
	d := time.Since(began)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.calls[method]
	if s == nil {
		s = &callStat{}
		c.calls[method] = s
	}
	s.n++
	s.total += d
}

// reset forgets the calls counted so far (the funding's and the direct
// sender's reads).
func (c *callCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[string]*callStat{}
}

// summary is "method count (mean)" for every method called, most called
// first, and the total count.
func (c *callCounts) summary() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.calls))
	total := 0
	for n, s := range c.calls {
		names = append(names, n)
		total += s.n
	}
	sort.Slice(names, func(i, j int) bool { return c.calls[names[i]].n > c.calls[names[j]].n })
	parts := make([]string, len(names))
	for i, n := range names {
		s := c.calls[n]
		parts[i] = fmt.Sprintf("%s %d (%s)", n, s.n, round(s.total/time.Duration(s.n)))
	}
	return strings.Join(parts, ", "), total
}

func (c *countingLedger) ChainID(ctx context.Context) (*big.Int, error) {
	defer c.count("ChainID", time.Now())
	return c.WalletLedger.ChainID(ctx)
}

func (c *countingLedger) PendingNonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	defer c.count("PendingNonceAt", time.Now())
	return c.WalletLedger.PendingNonceAt(ctx, a)
}

func (c *countingLedger) NonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	defer c.count("NonceAt", time.Now())
	return c.WalletLedger.NonceAt(ctx, a)
}

func (c *countingLedger) BalanceAt(ctx context.Context, a ledger.Address) (*big.Int, error) {
	defer c.count("BalanceAt", time.Now())
	return c.WalletLedger.BalanceAt(ctx, a)
}

func (c *countingLedger) SuggestFees(ctx context.Context) (ledger.Fees, error) {
	defer c.count("SuggestFees", time.Now())
	return c.WalletLedger.SuggestFees(ctx)
}

func (c *countingLedger) EstimateGas(ctx context.Context, msg ledger.CallMsg) (uint64, error) {
	defer c.count("EstimateGas", time.Now())
	return c.WalletLedger.EstimateGas(ctx, msg)
}

func (c *countingLedger) Call(ctx context.Context, msg ledger.CallMsg, block *uint64) ([]byte, error) {
	defer c.count("Call", time.Now())
	return c.WalletLedger.Call(ctx, msg, block)
}

func (c *countingLedger) SendRawTransaction(ctx context.Context, raw []byte) error {
	defer c.count("SendRawTransaction", time.Now())
	return c.WalletLedger.SendRawTransaction(ctx, raw)
}

func (c *countingLedger) TransactionReceipt(ctx context.Context, h ledger.TxHash) (ledger.Receipt, error) {
	defer c.count("TransactionReceipt", time.Now())
	return c.WalletLedger.TransactionReceipt(ctx, h)
}

func (c *countingLedger) HeadBlock(ctx context.Context) (ledger.BlockRef, error) {
	defer c.count("HeadBlock", time.Now())
	return c.WalletLedger.HeadBlock(ctx)
}

func (c *countingLedger) BlockAt(ctx context.Context, n uint64) (ledger.BlockRef, bool, error) {
	defer c.count("BlockAt", time.Now())
	return c.WalletLedger.BlockAt(ctx, n)
}

func (c *countingLedger) TxsAtNonce(ctx context.Context, a ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	defer c.count("TxsAtNonce", time.Now())
	return c.WalletLedger.TxsAtNonce(ctx, a, nonce)
}

func (c *countingLedger) TxsInBlock(ctx context.Context, a ledger.Address, n uint64) ([]ledger.NonceTx, bool, error) {
	defer c.count("TxsInBlock", time.Now())
	return c.WalletLedger.TxsInBlock(ctx, a, n)
}
