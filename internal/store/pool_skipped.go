package store

// A transaction the chain skipped. The chain's builder service runs a
// bundle's transactions in order and leaves out each one its EVM refuses
// (ledger.JAMBlock.Skipped names them, in the JAM block that accumulates the
// bundle). Such a transaction never ran, so it must not stay included in an
// executed, then final, bundle holding its sender's nonce: that would show
// it included with no receipt, count its nonce at "pending", and strand
// every later transaction of its sender. BundleApplyBlocks applies the
// skips in the block's own database transaction:
//
//   - skipped for a nonce gap (its nonce above its sender's next: geth's
//     core.ErrNonceTooHigh) it is valid and goes back to the pool queued,
//     as geth keeps a gapped transaction queued, or pending when the pool
//     already holds every nonce below it (from the sender's chain nonce on:
//     a resend of the missing nonce that came first);
//   - skipped for any other reason it is dropped (PoolDropSkipped) with the
//     chain's reason (PoolTx.ChainReason), and its nonce is free;
//   - the sender's pending transactions above a nonce left free or queued
//     wait again (queued): there is a gap before them, so the bundler does
//     not cut them and eth_getTransactionCount at "pending" stops at the
//     gap, as the chain's nonce does.
//
// Each sender's transactions move under the sender's intake lock
// (pool_senders), taken in sender order after the bundle rows (lock order:
// builder_chains → cores → bundles → bundle_versions → pool_senders →
// pool_txs → pool_chains), so an intake of the same sender sees the skip
// whole or not at all.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// SkippedPoolTx is a pool transaction the chain left out of its bundle's
// EVM block, as BundleApplyBlocks applied it.
type SkippedPoolTx struct {
	Hash   string
	Sender string
	Nonce  uint64
	// Bundle is the block number of the bundle it was in.
	Bundle uint64
	// Reason is the chain's.
	Reason string
	// NonceGap is the chain's verdict that the nonce was above the
	// sender's next.
	NonceGap bool
	// State is what it became: dropped (PoolDropSkipped), queued or
	// pending.
	State PoolTxState
}

// maxChainReason is the longest chain reason stored (the column's rule).
const maxChainReason = 1024

// skipTarget is one skipped transaction found in its bundle.
type skipTarget struct {
	sk       ledger.SkippedTx
	bundleID int64
	bundle   uint64
	sender   string
	nonce    uint64
}

// applySkipped applies a block's skipped transactions (see the file's
// comment), adding what it did to got. It reports whether a transaction
// became pending (the bundle queuers may cut it).
func applySkipped(ctx context.Context, q *dbsqlc.Queries, chainID int64, skipped []ledger.SkippedTx, now time.Time, got *BundleApplied) (bool, error) {
	var targets []skipTarget
	for _, sk := range skipped {
		v, err := one(q.BundleVersionGet(ctx, dbsqlc.BundleVersionGetParams{PackageHash: sk.Package.Hex(), ChainID: chainID}))
		if errors.Is(err, ErrNotFound) {
			got.UnknownSkipped++
			continue
		} else if err != nil {
			return false, fmt.Errorf("reading package %s: %w", sk.Package.Hex(), err)
		}
		row, err := one(q.PoolTxGet(ctx, dbsqlc.PoolTxGetParams{ChainID: chainID, TxHash: sk.Tx.Hex()}))
		if errors.Is(err, ErrNotFound) || (err == nil && (row.BundleID == nil || *row.BundleID != v.BundleID)) {
			got.UnknownSkipped++
			continue
		} else if err != nil {
			return false, fmt.Errorf("reading pool transaction %s: %w", sk.Tx.Hex(), err)
		}
		targets = append(targets, skipTarget{sk: sk, bundleID: v.BundleID, bundle: uint64(v.Number), sender: row.Sender, nonce: uint64(row.Nonce)})
	}
	if len(targets) == 0 {
		return false, nil
	}
	slices.SortFunc(targets, func(a, b skipTarget) int {
		return cmp.Or(cmp.Compare(a.sender, b.sender), cmp.Compare(a.nonce, b.nonce))
	})
	var pending, queued int64
	promotedAny := false
	for i := 0; i < len(targets); {
		j := i
		for j < len(targets) && targets[j].sender == targets[i].sender {
			j++
		}
		p, qd, promoted, err := applySenderSkips(ctx, q, chainID, targets[i:j], now, got)
		if err != nil {
			return false, err
		}
		pending, queued = pending+p, queued+qd
		promotedAny = promotedAny || promoted
		i = j
	}
	return promotedAny, poolAdjust(ctx, q, chainID, pending, queued)
}

// applySenderSkips applies one sender's skipped transactions (ts, in nonce
// order) under its lock. It returns how the chain's pending and queued
// counts moved and whether a transaction became pending.
func applySenderSkips(ctx context.Context, q *dbsqlc.Queries, chainID int64, ts []skipTarget, now time.Time, got *BundleApplied) (pending, queued int64, promoted bool, err error) {
	sender := ts[0].sender
	// The sender's lock (its row exists since its first intake); it answers
	// the highest chain nonce an intake saw, the base of its pending run.
	base, err := one(q.PoolSenderLock(ctx, dbsqlc.PoolSenderLockParams{ChainID: chainID, Sender: sender, ChainNonce: 0, Now: now}))
	if err != nil {
		return 0, 0, false, fmt.Errorf("locking pool sender %s: %w", sender, err)
	}
	first := len(got.SkippedTxs)
	for _, t := range ts {
		arg := dbsqlc.PoolTxUnbundleSkippedParams{
			State: dbsqlc.LedgerqPoolTxStateQueued, Now: now, ChainID: chainID, Sender: sender, TxHash: t.sk.Tx.Hex(), BundleID: &t.bundleID,
		}
		if !t.sk.NonceGap {
			reason, drop := chainReason(t.sk.Reason), PoolDropSkipped
			arg.State, arg.DropReason, arg.ChainReason = dbsqlc.LedgerqPoolTxStateDropped, &drop, &reason
		}
		if _, err := one(q.PoolTxUnbundleSkipped(ctx, arg)); errors.Is(err, ErrNotFound) {
			got.UnknownSkipped++ // left the bundle since it was read
			continue
		} else if err != nil {
			return 0, 0, false, fmt.Errorf("taking skipped transaction %s out of bundle %d: %w", t.sk.Tx.Hex(), t.bundle, err)
		}
		st := PoolTxState(arg.State)
		if st == PoolQueued {
			queued++
			got.SkippedRequeued++
		} else {
			got.SkippedDropped++
		}
		got.SkippedTxs = append(got.SkippedTxs, SkippedPoolTx{
			Hash: t.sk.Tx.Hex(), Sender: sender, Nonce: t.nonce, Bundle: t.bundle, Reason: t.sk.Reason, NonceGap: t.sk.NonceGap, State: st,
		})
	}
	mine := got.SkippedTxs[first:]
	if len(mine) == 0 {
		return 0, 0, false, nil
	}

	// The pending run from the sender's chain nonce, as an intake makes it:
	// queued transactions in it (a requeued one whose gap a resend already
	// filled) become pending; pending ones above the first nonce this skip
	// left free or queued wait again.
	rows, err := q.PoolSenderLive(ctx, dbsqlc.PoolSenderLiveParams{ChainID: chainID, Sender: sender, ChainNonce: base})
	if err != nil {
		return 0, 0, false, fmt.Errorf("reading the transactions of %s: %w", sender, err)
	}
	byNonce := make(map[int64]dbsqlc.PoolSenderLiveRow, len(rows))
	for _, r := range rows {
		byNonce[r.Nonce] = r
	}
	var promote, demote []string
	run := base
	for r, ok := byNonce[run]; ok; r, ok = byNonce[run] {
		if PoolTxState(r.State) == PoolQueued {
			promote = append(promote, r.TxHash)
		}
		run++
	}
	gap := int64(-1)
	for i := range mine {
		switch n := int64(mine[i].Nonce); {
		case n < run && mine[i].State == PoolQueued:
			mine[i].State = PoolPending // promoted with the run
		case n >= run && (gap < 0 || n < gap):
			gap = n // below the chain's nonce it leaves no gap
		}
	}
	if gap >= 0 {
		for _, r := range rows {
			if PoolTxState(r.State) == PoolPending && r.Nonce > gap {
				demote = append(demote, r.TxHash)
			}
		}
	}
	// Under the sender's lock and the chain's builder lock no intake, sweep
	// or cut moves them: a row that moved is an error here.
	if err := movePoolTxs(ctx, q, chainID, sender, now, promote, demote); err != nil {
		return 0, 0, false, fmt.Errorf("after a skip: %w", err)
	}
	pending += int64(len(promote) - len(demote))
	queued += int64(len(demote) - len(promote))
	if _, err := q.PoolSenderSetNext(ctx, dbsqlc.PoolSenderSetNextParams{NextNonce: run, Now: now, ChainID: chainID, Sender: sender}); err != nil {
		return 0, 0, false, fmt.Errorf("recording the next nonce of %s: %w", sender, err)
	}
	return pending, queued, len(promote) > 0, nil
}

// chainReason is the chain's reason as stored: never empty, at most
// maxChainReason bytes, cut at a rune boundary.
func chainReason(r string) string {
	if r == "" {
		return "no reason given"
	}
	if len(r) <= maxChainReason {
		return r
	}
	r = r[:maxChainReason]
	for len(r) > 0 && !utf8.ValidString(r) {
		r = r[:len(r)-1]
	}
	return r
}
