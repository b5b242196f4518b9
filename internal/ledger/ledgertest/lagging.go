package ledgertest

import (
	"context"
	"math/rand/v2"
	"slices"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Lag makes a WalletLedger's reads answer as a node a few blocks behind the
// others does (one backend of a load balancer): as of Blocks blocks before
// the head, for a share of the reads or for the next ones. A lagging read
// answers the head Blocks back, no block above it, no receipt in a block
// above it, the nonce the account had at it, and no transaction at a nonce
// it had not reached. Sends never lag.
type Lag struct {
	// Blocks is how far behind the head a lagging read answers.
	Blocks uint64
	// From, when set, answers the lagging reads instead: a node still on a
	// chain the others left (a reorganisation it has not followed).
	From ledger.WalletLedger
	// Next: the next Next reads lag. With Next 0, each read lags with
	// probability Share, drawn from a generator seeded with Seed.
	Next  int
	Share float64
	Seed  uint64
	// Only, when set, names the methods that lag (ledger.WalletLedger's
	// method names among NonceAt, HeadBlock, BlockAt, TransactionReceipt,
	// TxsAtNonce and TxsInBlock); nil: all of them.
	Only []string
}

// SetLag makes the ledger's reads lag as g says; the zero Lag stops it.
func (l *WalletLedger) SetLag(g Lag) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lag = g
	l.lagRand = rand.New(rand.NewPCG(g.Seed, 1))
}

// Lagged returns how many reads answered lagging.
func (l *WalletLedger) Lagged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lagged
}

// lags reports whether this call of method lags, and how.
func (l *WalletLedger) lags(method string) (Lag, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.lag
	switch {
	case g.Blocks == 0 && g.From == nil:
		return g, false
	case g.Only != nil && !slices.Contains(g.Only, method):
		return g, false
	case g.Next > 0:
		l.lag.Next--
	case g.Share <= 0 || l.lagRand.Float64() >= g.Share:
		return g, false
	}
	l.lagged++
	return g, true
}

// laggingHead is the block a lagging read answers as the head.
func (l *WalletLedger) laggingHead(ctx context.Context, g Lag) (ledger.BlockRef, error) {
	if g.From != nil {
		return g.From.HeadBlock(ctx)
	}
	h, err := l.WalletLedger.HeadBlock(ctx)
	if err != nil {
		return ledger.BlockRef{}, err
	}
	b, _, err := l.WalletLedger.BlockAt(ctx, h.Number-min(g.Blocks, h.Number))
	return b, err
}

// laggingNonce is a's nonce at the lagging head: below the lowest nonce
// of a's transactions in the blocks after it.
func (l *WalletLedger) laggingNonce(ctx context.Context, g Lag, a ledger.Address) (uint64, error) {
	if g.From != nil {
		return g.From.NonceAt(ctx, a)
	}
	n, err := l.WalletLedger.NonceAt(ctx, a)
	if err != nil {
		return 0, err
	}
	lh, err := l.laggingHead(ctx, g)
	if err != nil {
		return 0, err
	}
	h, err := l.WalletLedger.HeadBlock(ctx)
	if err != nil {
		return 0, err
	}
	for b := lh.Number + 1; b <= h.Number; b++ {
		txs, _, err := l.WalletLedger.TxsInBlock(ctx, a, b)
		if err != nil {
			return 0, err
		}
		for _, tx := range txs {
			n = min(n, tx.Nonce)
		}
	}
	return n, nil
}

func (l *WalletLedger) lagBlockAt(ctx context.Context, g Lag, number uint64) (ledger.BlockRef, bool, error) {
	if g.From != nil {
		return g.From.BlockAt(ctx, number)
	}
	lh, err := l.laggingHead(ctx, g)
	if err != nil || number > lh.Number {
		return ledger.BlockRef{}, false, err
	}
	return l.WalletLedger.BlockAt(ctx, number)
}

func (l *WalletLedger) lagReceipt(ctx context.Context, g Lag, h ledger.TxHash) (ledger.Receipt, error) {
	if g.From != nil {
		return g.From.TransactionReceipt(ctx, h)
	}
	rc, err := l.WalletLedger.TransactionReceipt(ctx, h)
	if err != nil || !rc.Found {
		return rc, err
	}
	lh, err := l.laggingHead(ctx, g)
	if err != nil || rc.BlockNumber > lh.Number {
		return ledger.Receipt{}, err
	}
	return rc, nil
}

func (l *WalletLedger) lagTxsAtNonce(ctx context.Context, g Lag, a ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	if g.From != nil {
		return g.From.TxsAtNonce(ctx, a, nonce)
	}
	n, err := l.laggingNonce(ctx, g, a)
	if err != nil || nonce >= n {
		return nil, false, err
	}
	return l.WalletLedger.TxsAtNonce(ctx, a, nonce)
}

func (l *WalletLedger) lagTxsInBlock(ctx context.Context, g Lag, a ledger.Address, number uint64) ([]ledger.NonceTx, bool, error) {
	if g.From != nil {
		return g.From.TxsInBlock(ctx, a, number)
	}
	lh, err := l.laggingHead(ctx, g)
	if err != nil || number > lh.Number {
		return nil, false, err
	}
	return l.WalletLedger.TxsInBlock(ctx, a, number)
}
