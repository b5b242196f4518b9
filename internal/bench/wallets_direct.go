package bench

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
)

// The baselines a wallet run can compare the lane with.
const (
	// BaselineNone runs the lane alone.
	BaselineNone = ""
	// BaselineDirect first runs a direct sender with no database (fresh
	// funded keys, nonces counted in memory) on the same chain.
	BaselineDirect = "direct"
)

// blockPollInterval is how often the block clock reads the chain's head.
const blockPollInterval = 20 * time.Millisecond

// blockClock tells when each block was first seen as the chain's head by a
// poller reading it every blockPollInterval. "When a transaction was mined"
// is when its block was first seen, for the lane and the direct sender
// alike: block timestamps are whole seconds on geth, too coarse for runs of
// a few seconds.
type blockClock struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
	head uint64
	err  error

	stop context.CancelFunc
	done chan struct{}
}

// watchBlocks starts a block clock on l.
func watchBlocks(ctx context.Context, l ledger.WalletLedger, timeout time.Duration) *blockClock {
	ctx, stop := context.WithCancel(ctx)
	b := &blockClock{seen: map[uint64]time.Time{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(blockPollInterval)
		defer t.Stop()
		for {
			callCtx, cancel := context.WithTimeout(ctx, timeout)
			h, err := l.HeadBlock(callCtx)
			cancel()
			now := time.Now()
			b.mu.Lock()
			switch {
			case err != nil && ctx.Err() == nil:
				b.err = err
			case err == nil:
				if len(b.seen) == 0 {
					b.head = h.Number
					b.seen[h.Number] = now
				}
				// Blocks passed between two polls are all seen now.
				for n := b.head + 1; n <= h.Number; n++ {
					b.seen[n] = now
				}
				b.head = max(b.head, h.Number)
			}
			b.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return b
}

// close stops the poller.
func (b *blockClock) close() {
	b.stop()
	<-b.done
}

// at is when block n was first seen, false if it never was.
func (b *blockClock) at(n uint64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.seen[n]
	return t, ok
}

// await is when block n was first seen, waiting up to timeout for the
// poller to see it (a receipt can be read before the next poll), false if
// it never was.
func (b *blockClock) await(ctx context.Context, n uint64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if t, ok := b.at(n); ok {
			return t, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, false
		}
		time.Sleep(blockPollInterval / 2)
	}
}

// minedTimes reads the receipts of hashes (8 at a time) and returns, for
// each, when its block was first seen; a hash without a receipt or whose
// block was not seen is an error.
func (b *blockClock) minedTimes(ctx context.Context, l ledger.WalletLedger, hashes []common.Hash, timeout time.Duration) ([]time.Time, error) {
	out := make([]time.Time, len(hashes))
	err := inParallel(ctx, 8, len(hashes), 1, "reading receipts", func() bool { return true }, func(i int) error {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		rc, err := l.TransactionReceipt(callCtx, ledger.TxHash(hashes[i]))
		switch {
		case err != nil:
			return fmt.Errorf("receipt of %s: %w", hashes[i].Hex(), err)
		case !rc.Found:
			return fmt.Errorf("%s has no receipt", hashes[i].Hex())
		}
		t, ok := b.await(ctx, rc.BlockNumber, 10*time.Second)
		if !ok {
			return fmt.Errorf("%s is in block %d, which the block clock never saw", hashes[i].Hex(), rc.BlockNumber)
		}
		out[i] = t
		return nil
	})
	return out, err
}

// DirectReport is the direct sender's part of a run with --baseline direct.
type DirectReport struct {
	// Keys sent Sent transactions, TxsPerKey each.
	Keys, TxsPerKey, Sent int
	// SendTime runs from the first send to the end of the last.
	SendTime time.Duration
	// MinedTime runs from the first send to when the block of the last
	// transaction mined was first seen; MinedRate is Sent / MinedTime.
	MinedTime time.Duration
	MinedRate float64
	// MinedP50 and MinedP99 run from each transaction's send to when its
	// block was first seen.
	MinedP50, MinedP99 time.Duration
}

// directChain is what the direct sender needs of the chain: go-ethereum's
// ethclient on a node, the simulated chain's own methods in process (the
// lane reaches it in process too).
type directChain interface {
	send(ctx context.Context, tx *types.Transaction) error
	nonceAt(ctx context.Context, a common.Address) (uint64, error)
	close()
}

type ethclientChain struct{ c *ethclient.Client }

func (e ethclientChain) send(ctx context.Context, tx *types.Transaction) error {
	return e.c.SendTransaction(ctx, tx)
}

func (e ethclientChain) nonceAt(ctx context.Context, a common.Address) (uint64, error) {
	return e.c.NonceAt(ctx, a, nil)
}

func (e ethclientChain) close() { e.c.Close() }

type simChain struct{ l *evmsim.Ledger }

func (s simChain) send(ctx context.Context, tx *types.Transaction) error {
	raw, err := tx.MarshalBinary()
	if err != nil {
		return err
	}
	return s.l.SendRawTransaction(ctx, raw)
}

func (s simChain) nonceAt(ctx context.Context, a common.Address) (uint64, error) {
	return s.l.NonceAt(ctx, ledger.Address(a))
}

func (simChain) close() {}

// directKeys makes the direct sender's fresh keys.
func directKeys(n int) ([]*ecdsa.PrivateKey, []ledger.Address, error) {
	keys := make([]*ecdsa.PrivateKey, n)
	addrs := make([]ledger.Address, n)
	for i := range keys {
		k, err := crypto.GenerateKey()
		if err != nil {
			return nil, nil, fmt.Errorf("generating a direct sender key: %w", err)
		}
		keys[i], addrs[i] = k, ledger.Address(crypto.PubkeyToAddress(k.PublicKey))
	}
	return keys, addrs, nil
}

// runDirect is the baseline: every key sends TasksPerWallet transfers like
// the lane's (Value to the bench's recipient, the node's fee suggestion, the
// gas the node estimates for one of them), nonces counted in memory from 0,
// each key in its own goroutine, one send after the other; then it waits
// until every key's chain nonce is TasksPerWallet and reads when each
// transaction's block was first seen. No database is involved.
func (r *walletRun) runDirect(ctx context.Context) (*DirectReport, error) {
	c := &r.cfg
	m := c.TasksPerWallet
	var chain directChain
	// The direct sender runs on a run's one chain (validateChains).
	one := r.chains[0]
	switch l := one.ledger.(type) {
	case *evmsim.Ledger:
		chain = simChain{l}
	default:
		cl, err := ethclient.DialContext(ctx, c.LedgerURL)
		if err != nil {
			return nil, fmt.Errorf("direct sender: dialing %s: %w", c.LedgerURL, err)
		}
		chain = ethclientChain{cl}
	}
	defer chain.close()
	timeout := c.Node.Wallet.Lane.LedgerTimeout
	call := func(f func(ctx context.Context) error) error {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(callCtx)
	}
	var fees ledger.Fees
	var gas uint64
	if err := call(func(ctx context.Context) (err error) {
		if fees, err = one.ledger.SuggestFees(ctx); err != nil {
			return err
		}
		to := ledger.Address(benchRecipient)
		gas, err = one.ledger.EstimateGas(ctx, ledger.CallMsg{From: r.directAddrs[0], To: &to, Value: c.Value})
		return err
	}); err != nil {
		return nil, fmt.Errorf("direct sender: fees and gas: %w", err)
	}
	chainID := big.NewInt(one.id)
	signer := types.LatestSignerForChainID(chainID)
	hashes := make([]common.Hash, len(r.directKeys)*m)
	sentAt := make([]time.Time, len(hashes))

	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(r.directKeys))
	for k, key := range r.directKeys {
		wg.Go(func() {
			for n := range m {
				tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{
					ChainID: chainID, Nonce: uint64(n), GasTipCap: fees.TipCap, GasFeeCap: fees.FeeCap, Gas: gas,
					To: &benchRecipient, Value: c.Value,
				})
				if err != nil {
					errs[k] = err
					return
				}
				sentAt[k*m+n] = time.Now()
				if err := call(func(ctx context.Context) error { return chain.send(ctx, tx) }); err != nil {
					errs[k] = fmt.Errorf("direct sender: key %d nonce %d: %w", k, n, err)
					return
				}
				hashes[k*m+n] = tx.Hash()
			}
		})
	}
	wg.Wait()
	rep := &DirectReport{Keys: len(r.directKeys), TxsPerKey: m, SendTime: time.Since(start)}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.Sent = len(hashes)
	deadline := time.Now().Add(max(c.Grace, time.Minute))
	for k := range r.directKeys {
		for {
			var n uint64
			err := call(func(ctx context.Context) (err error) {
				n, err = chain.nonceAt(ctx, common.Address(r.directAddrs[k]))
				return err
			})
			if err == nil && n >= uint64(m) {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("direct sender: key %d's nonce is %d after the grace period, want %d (%v)", k, n, m, err)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(blockPollInterval):
			}
		}
	}
	mined, err := one.blocks.minedTimes(ctx, one.ledger, hashes, timeout)
	if err != nil {
		return nil, fmt.Errorf("direct sender: %w", err)
	}
	last, lat := lastAndLatencies(mined, sentAt)
	rep.MinedTime = last.Sub(start)
	rep.MinedRate = float64(rep.Sent) / rep.MinedTime.Seconds()
	rep.MinedP50, rep.MinedP99, _ = percentiles(lat)
	return rep, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lastAndLatencies is the latest of the mined times and each one's time since
// its from (a transaction's sending, or its task's creation).
func lastAndLatencies(mined, from []time.Time) (time.Time, []time.Duration) {
	var last time.Time
	lat := make([]time.Duration, len(mined))
	for i, t := range mined {
		last = maxTime(last, t)
		lat[i] = t.Sub(from[i])
	}
	return last, lat
}
