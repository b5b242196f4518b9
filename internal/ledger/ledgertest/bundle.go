package ledgertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

var _ ledger.BundleLedger = (*BundleLedger)(nil)

// BundleLedger is a ledger.BundleLedger held in memory, whose chain the test
// moves: its info is what SetInfo last said, its blocks are those AddBlock
// added, and it records every work package submitted. Its zero value is a
// chain without blocks that takes every package. It is safe for concurrent
// use.
type BundleLedger struct {
	// Submit, when set, answers each SubmitWorkPackage call, after it is
	// recorded. Set it before the ledger is used. It is called without the
	// ledger's lock held, so it may call the ledger back.
	Submit func(wp ledger.WorkPackage) error

	mu        sync.Mutex
	info      ledger.ChainInfo
	blocks    []ledger.JAMBlock
	submitted []ledger.WorkPackage
	err       error
}

// SetInfo sets what Info answers from now on.
func (l *BundleLedger) SetInfo(info ledger.ChainInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = info
}

// SetError makes every read (Info, RecentBlocks, Blocks) fail with err
// until it is set back to nil.
func (l *BundleLedger) SetError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// AddBlock adds b as the chain's newest block and returns it; b.Skipped
// declares the transactions the chain left out of the packages b
// accumulates. A zero Slot
// is the slot after the newest block's (1 for the first block), a zero Hash
// one of the slot's own (BlockHash). It panics when b's slot is not after
// the newest block's: a chain's blocks are in slot order.
func (l *BundleLedger) AddBlock(b ledger.JAMBlock) ledger.JAMBlock {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last uint64
	if n := len(l.blocks); n > 0 {
		last = l.blocks[n-1].Slot
	}
	if b.Slot == 0 {
		b.Slot = last + 1
	}
	if len(l.blocks) > 0 && b.Slot <= last {
		panic(fmt.Sprintf("ledgertest: block at slot %d added after slot %d", b.Slot, last))
	}
	if b.Hash == (ledger.Hash{}) {
		b.Hash = BlockHash(b.Slot)
	}
	b.Guarantees = slices.Clone(b.Guarantees)
	b.Accumulations = slices.Clone(b.Accumulations)
	b.Skipped = slices.Clone(b.Skipped)
	l.blocks = append(l.blocks, b)
	return b
}

// BlockHash is the hash AddBlock gives the block at slot when the test gives
// none.
func BlockHash(slot uint64) ledger.Hash {
	var h ledger.Hash
	copy(h[:], "ledgertest block")
	binary.BigEndian.PutUint64(h[24:], slot)
	return h
}

// Submitted returns every work package submitted so far, in call order.
func (l *BundleLedger) Submitted() []ledger.WorkPackage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.submitted)
}

// lockUnfailed takes the lock for a read of the chain, unless ctx ended or
// SetError set a failure: then it answers that error, without the lock.
func (l *BundleLedger) lockUnfailed(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if err := l.err; err != nil {
		l.mu.Unlock()
		return err
	}
	return nil
}

// Info answers what SetInfo said.
func (l *BundleLedger) Info(ctx context.Context) (ledger.ChainInfo, error) {
	if err := ctx.Err(); err != nil {
		return ledger.ChainInfo{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info, l.err
}

// RecentBlocks answers the newest ledger.RecentHistorySize blocks, oldest
// first.
func (l *BundleLedger) RecentBlocks(ctx context.Context) ([]ledger.BlockRef, error) {
	if err := l.lockUnfailed(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	recent := l.blocks[max(0, len(l.blocks)-ledger.RecentHistorySize):]
	out := make([]ledger.BlockRef, len(recent))
	for i, b := range recent {
		out[i] = ledger.BlockRef{Number: b.Slot, Hash: b.Hash}
	}
	return out, nil
}

// SubmitWorkPackage records wp and answers it with Submit, or takes it.
func (l *BundleLedger) SubmitWorkPackage(ctx context.Context, wp ledger.WorkPackage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	wp.Txs = slices.Clone(wp.Txs)
	l.mu.Lock()
	l.submitted = append(l.submitted, wp)
	submit := l.Submit
	l.mu.Unlock()
	if submit != nil {
		return submit(wp)
	}
	return nil
}

// Blocks answers the blocks with a slot above after, oldest first, at most
// limit of them.
func (l *BundleLedger) Blocks(ctx context.Context, after uint64, limit int) ([]ledger.JAMBlock, error) {
	if err := l.lockUnfailed(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	var out []ledger.JAMBlock
	for _, b := range l.blocks {
		if len(out) == limit {
			break
		}
		if b.Slot > after {
			b.Guarantees, b.Accumulations = slices.Clone(b.Guarantees), slices.Clone(b.Accumulations)
			b.Skipped = slices.Clone(b.Skipped)
			out = append(out, b)
		}
	}
	return out, nil
}
