package store

// The builder lane's bundles (its bundle queue): pending
// pool transactions are cut into EVM blocks with consecutive numbers; each is
// claimed onto a JAM core and submitted as a work package, one version at a
// time, until a version is guaranteed, then accumulated, then final.
//
// Lock order. Every transaction below that locks more than one of these rows
// takes them in this order, so two processes never deadlock:
//
//	builder_chains → cores → bundles → bundle_versions → pool_txs
//
//   - BundleCut: the chain row, then the pending pool_txs (FOR UPDATE) and
//     the bundles it inserts (new rows nobody else can hold).
//   - BundleClaim: a free core (SKIP LOCKED), then a queued bundle (SKIP
//     LOCKED), then its version row.
//   - BundleSubmitResult, BundleRequeue: the bundle's core, then the bundle.
//   - BundleApplyBlocks: the chain row, then per package the bundle's core,
//     then the bundle, then its version row; then, for the transactions the
//     chain skipped, their senders' pool_senders rows in sender order, then
//     those pool_txs (pool_skipped.go).
//   - BundleRetryTimedOut's drop: the chain row, then the cores of every
//     bundle it drops (in core order), then the bundles, then their pool_txs.
//
// The requeue race (both versions of one bundle guaranteed after a timeout)
// is closed where it happens: requeue and claim both require that no
// version is guaranteed, and a guarantee is applied only to a bundle that has
// none (the first wins), each in one conditional statement.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// BundleState is a bundle's state.
type BundleState string

// Bundle states.
const (
	// BundleQueued: cut, waiting for a core.
	BundleQueued BundleState = "queued"
	// BundleSubmitted: a version is with the guarantors; it holds a core.
	BundleSubmitted BundleState = "submitted"
	// BundleGuaranteed: a version is in a block's E_G; its core is free.
	BundleGuaranteed BundleState = "guaranteed"
	// BundleAccumulated: in a block's E_A: executed.
	BundleAccumulated BundleState = "accumulated"
	// BundleFinalized: accumulated at least the finality depth ago.
	BundleFinalized BundleState = "finalized"
	// BundleDropped: given up (Bundle.DropReason); its transactions are
	// pending again.
	BundleDropped BundleState = "dropped"
)

// Bundle is one row of ledgerq.bundles.
type Bundle struct {
	ID      int64
	ChainID int64
	// Number is the EVM block number; Parent the hash of the block before.
	Number uint64
	Parent ledger.Hash
	// Hash is ledger.BundleHash(Parent, Number, its transactions' hashes).
	Hash    ledger.Hash
	State   BundleState
	Version int
	// Core is the core a submitted bundle holds (nil otherwise).
	Core *int
	// Anchor is what the next (queued) or current (submitted) version is
	// built on; nil forces a rebuild at the next claim.
	Anchor *ledger.BlockRef
	// GuaranteedHash and GuaranteedVersion name the first version seen
	// guaranteed.
	GuaranteedHash    *ledger.Hash
	GuaranteedVersion *int
	// AccumulatedSlot is the slot of the block that accumulated it.
	AccumulatedSlot *uint64
	// SubmitFailures counts refused submissions; NextSubmitAt is when a
	// queued bundle may be claimed.
	SubmitFailures int
	NextSubmitAt   time.Time
	DropReason     string
	TxCount        int
	CreatedAt      time.Time
	SubmittedAt    *time.Time
	GuaranteedAt   *time.Time
	AccumulatedAt  *time.Time
	FinalizedAt    *time.Time
	UpdatedAt      time.Time
}

// BundleVersion is one work package claimed for submission
// (ledgerq.bundle_versions).
type BundleVersion struct {
	PackageHash ledger.Hash
	BundleID    int64
	Version     int
	Core        int
	Anchor      ledger.BlockRef
	SubmittedAt time.Time
	// Outcome is "" (not recorded), "sent", "unknown" or "refused: reason".
	Outcome string
	// GuaranteedSlot is set for the one version whose guarantee won.
	GuaranteedSlot *uint64
}

// Outcomes of a submission, as bundle_versions.outcome records them.
const (
	BundleOutcomeSent    = "sent"
	BundleOutcomeUnknown = "unknown"
	// BundleOutcomeRefused prefixes the ledger's reason.
	BundleOutcomeRefused = "refused: "
)

func hashFromHex(s string) ledger.Hash {
	h, _ := ledger.ParseHash(s)
	return h
}

func bundleFromRow(r dbsqlc.LedgerqBundle) Bundle {
	b := Bundle{
		ID: r.ID, ChainID: r.ChainID, Number: uint64(r.Number), Parent: hashFromHex(r.Parent), Hash: hashFromHex(r.Hash),
		State: BundleState(r.State), Version: int(r.Version), SubmitFailures: int(r.SubmitFailures),
		NextSubmitAt: r.NextSubmitAt.UTC(), TxCount: int(r.TxCount), CreatedAt: r.CreatedAt.UTC(),
		SubmittedAt: utcPtr(r.SubmittedAt), GuaranteedAt: utcPtr(r.GuaranteedAt),
		AccumulatedAt: utcPtr(r.AccumulatedAt), FinalizedAt: utcPtr(r.FinalizedAt), UpdatedAt: r.UpdatedAt.UTC(),
		DropReason: deref(r.DropReason),
	}
	if r.Core != nil {
		c := int(*r.Core)
		b.Core = &c
	}
	if r.AnchorSlot != nil && r.AnchorHash != nil {
		b.Anchor = &ledger.BlockRef{Number: uint64(*r.AnchorSlot), Hash: hashFromHex(*r.AnchorHash)}
	}
	if r.GuaranteedHash != nil {
		h := hashFromHex(*r.GuaranteedHash)
		b.GuaranteedHash = &h
	}
	if r.GuaranteedVersion != nil {
		v := int(*r.GuaranteedVersion)
		b.GuaranteedVersion = &v
	}
	if r.AccumulatedSlot != nil {
		s := uint64(*r.AccumulatedSlot)
		b.AccumulatedSlot = &s
	}
	return b
}

func bundleVersionFromRow(r dbsqlc.LedgerqBundleVersion) BundleVersion {
	v := BundleVersion{
		PackageHash: hashFromHex(r.PackageHash), BundleID: r.BundleID, Version: int(r.Version), Core: int(r.Core),
		Anchor:      ledger.BlockRef{Number: uint64(r.AnchorSlot), Hash: hashFromHex(r.AnchorHash)},
		SubmittedAt: r.SubmittedAt.UTC(), Outcome: deref(r.Outcome),
	}
	if r.GuaranteedSlot != nil {
		s := uint64(*r.GuaranteedSlot)
		v.GuaranteedSlot = &s
	}
	return v
}

// slotInt converts a JAM slot or EVM number for the database.
func slotInt(what string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s %d out of range", what, v)
	}
	return int64(v), nil
}

// lockChain takes the chain's builder lock (creating its row), returning its
// processed slot.
func lockChain(ctx context.Context, q *dbsqlc.Queries, chainID int64, now time.Time) (*int64, error) {
	processed, err := one(q.BuilderChainLock(ctx, dbsqlc.BuilderChainLockParams{ChainID: chainID, Now: now}))
	if err != nil {
		return nil, fmt.Errorf("locking builder chain %d: %w", chainID, err)
	}
	return processed, nil
}

// BundleCutParams is one cut.
type BundleCutParams struct {
	ChainID int64
	// Size is the most transactions one bundle takes.
	Size int
	// MaxQueued bounds the chain's queued bundles: when the queue is full,
	// transactions stay pending.
	MaxQueued int
	// MaxBundles bounds the bundles this call cuts.
	MaxBundles int
	// GasLimit is the block's gas limit: a bundle's transactions' gas
	// limits sum to at most it, so that the chain never leaves a valid
	// transaction out for want of room in the block. 0: no bound.
	GasLimit uint64
	// Executed is the builder service's last executed block: the first
	// bundle of a chain with no live bundle follows it.
	Executed ledger.BlockRef
	// Recent are the chain's recent blocks, oldest first, for the anchors
	// (none: the anchor is chosen at the claim).
	Recent []ledger.BlockRef
	Cores  int
	Now    time.Time
}

// BundleCut cuts the chain's pending pool transactions into bundles, in one
// database transaction under the chain's lock:
// while fewer than MaxQueued bundles are queued, fewer than MaxBundles were
// cut and pending transactions remain, it takes up to Size of them in
// (sender, nonce) order, makes them the bundle that follows the highest
// live one (or Executed), and marks them included. A partial bundle (fewer
// than Size) is cut only while fewer than Cores bundles are queued: then
// the next submission window has a bundle for every core, and the pending
// transactions wait to fill a whole bundle instead of taking a core-window
// with a few. Creating a bundle and including its transactions commit together, so
// a transaction leaves the pool only once its bundle is stored, by
// construction.
func (s *Store) BundleCut(ctx context.Context, p BundleCutParams) ([]Bundle, error) {
	switch {
	case p.Size < 1, p.MaxQueued < 0, p.MaxBundles < 0:
		return nil, fmt.Errorf("cutting bundles: size %d must be at least 1, max queued %d and max bundles %d at least 0",
			p.Size, p.MaxQueued, p.MaxBundles)
	case p.Executed.Number >= math.MaxInt64:
		return nil, fmt.Errorf("cutting bundles: executed block %d out of range", p.Executed.Number)
	}
	var cut []Bundle
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		cut = nil
		var included int64
		if _, err := lockChain(ctx, q, p.ChainID, p.Now); err != nil {
			return err
		}
		queued, err := one(q.BundleCountQueued(ctx, p.ChainID))
		if err != nil {
			return fmt.Errorf("counting queued bundles of chain %d: %w", p.ChainID, err)
		}
		last := p.Executed
		if row, err := one(q.BundleLastLive(ctx, p.ChainID)); err == nil {
			last = ledger.BlockRef{Number: uint64(row.Number), Hash: hashFromHex(row.Hash)}
		} else if !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("reading the last bundle of chain %d: %w", p.ChainID, err)
		}
		for queued < int64(p.MaxQueued) && len(cut) < p.MaxBundles {
			rows, err := q.BundleTxLockForCut(ctx, dbsqlc.BundleTxLockForCutParams{ChainID: p.ChainID, Max: int32(min(p.Size, math.MaxInt32))})
			if err != nil {
				return fmt.Errorf("taking pending transactions of chain %d: %w", p.ChainID, err)
			}
			hashes, full := fitGas(rows, p.GasLimit)
			if len(hashes) == 0 || (!full && len(hashes) < p.Size && queued >= int64(max(p.Cores, 1))) {
				break
			}
			txHashes := make([]ledger.Hash, len(hashes))
			for i, h := range hashes {
				txHashes[i] = hashFromHex(h)
			}
			number := last.Number + 1
			hash := ledger.BundleHash(last.Hash, number, txHashes)
			ins := dbsqlc.BundleInsertParams{
				ChainID: p.ChainID, Number: int64(number), Parent: last.Hash.Hex(), Hash: hash.Hex(),
				Now: p.Now, TxCount: int32(len(hashes)),
			}
			if anchor, ok := ledger.PickAnchor(p.Recent, ledger.AnchorOffset(int(queued), p.Cores)); ok {
				slot, err := slotInt("anchor slot", anchor.Number)
				if err != nil {
					return fmt.Errorf("cutting bundle %d: %w", number, err)
				}
				h := anchor.Hash.Hex()
				ins.AnchorSlot, ins.AnchorHash = &slot, &h
			}
			row, err := one(q.BundleInsert(ctx, ins))
			if err != nil {
				return fmt.Errorf("storing bundle %d of chain %d: %w", number, p.ChainID, err)
			}
			n, err := q.BundleTxInclude(ctx, dbsqlc.BundleTxIncludeParams{
				BundleID: row.ID, Number: row.Number, Now: p.Now, ChainID: p.ChainID, TxHashes: hashes,
			})
			if err != nil {
				return fmt.Errorf("including the transactions of bundle %d: %w", number, err)
			}
			if n != int64(len(hashes)) {
				return fmt.Errorf("including the transactions of bundle %d: %d of %d were pending", number, n, len(hashes))
			}
			cut = append(cut, bundleFromRow(row))
			last = ledger.BlockRef{Number: number, Hash: hash}
			queued++
			included += n
		}
		if err := poolAdjust(ctx, q, p.ChainID, -included, 0); err != nil {
			return err
		}
		return wakeAll(ctx, q, wakeIf{len(cut) > 0, notify.BundleSubmitter})
	})
	if err != nil {
		return nil, err
	}
	return cut, nil
}

// BundleEnsureCores makes the chain's core rows 0 .. cores-1 and removes
// free rows at or above cores (a held one goes once its bundle frees it and
// this runs again).
func (s *Store) BundleEnsureCores(ctx context.Context, chainID int64, cores int, now time.Time) error {
	if cores < 0 || cores > math.MaxInt32 {
		return fmt.Errorf("ensuring cores of chain %d: %d cores out of range", chainID, cores)
	}
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		if _, err := lockChain(ctx, q, chainID, now); err != nil {
			return err
		}
		if cores > 0 {
			if err := q.CoreEnsure(ctx, dbsqlc.CoreEnsureParams{ChainID: chainID, Now: now, LastCore: int32(cores - 1)}); err != nil {
				return fmt.Errorf("creating cores of chain %d: %w", chainID, err)
			}
		}
		if _, err := q.CoreRemoveFreeAbove(ctx, dbsqlc.CoreRemoveFreeAboveParams{ChainID: chainID, Cores: int32(cores)}); err != nil {
			return fmt.Errorf("removing cores of chain %d: %w", chainID, err)
		}
		return nil
	})
}

// BundleClaimParams is one claim.
type BundleClaimParams struct {
	ChainID int64
	// Recent are the chain's recent blocks, oldest first (at least one).
	Recent []ledger.BlockRef
	// Cores is the chain's core count: only cores below it are claimed.
	Cores int
	Now   time.Time
}

// BundleClaim is a bundle claimed for submission: its work package, ready
// to send after the claim committed.
type BundleClaim struct {
	Bundle  Bundle
	Package ledger.WorkPackage
	// Rebuilt says the package is on a fresh anchor (version above 1, no
	// anchor, or a stale one).
	Rebuilt bool
}

// PackageHash is the claimed package's work-package hash.
func (c *BundleClaim) PackageHash() ledger.Hash {
	return ledger.PackageHash(c.Bundle.Hash, c.Package.Version, c.Package.Core, c.Package.Anchor)
}

// BundleClaim takes a free core and the queued bundle with the lowest number
// that is due and has no version guaranteed (the requeue race's guard), in
// one transaction: the core row (FOR UPDATE SKIP LOCKED) makes
// "at most cores submitted" hold across processes. The bundle is rebuilt on
// a fresh anchor when its version is above 1, it has no anchor, or its
// anchor is stale at the head of Recent. It records the package's version
// row and leaves the bundle submitted; the caller sends the package after
// this returns and reports with BundleSubmitResult. It returns nil, nil when
// no core is free or no bundle is ready.
func (s *Store) BundleClaim(ctx context.Context, p BundleClaimParams) (*BundleClaim, error) {
	if len(p.Recent) == 0 {
		return nil, fmt.Errorf("claiming a bundle of chain %d: no recent blocks to anchor to", p.ChainID)
	}
	if p.Cores < 1 || p.Cores > math.MaxInt32 {
		return nil, fmt.Errorf("claiming a bundle of chain %d: %d cores out of range", p.ChainID, p.Cores)
	}
	head := p.Recent[len(p.Recent)-1].Number
	var claim *BundleClaim
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		claim = nil
		core, err := one(q.CoreClaimFree(ctx, dbsqlc.CoreClaimFreeParams{ChainID: p.ChainID, Cores: int32(p.Cores)}))
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return fmt.Errorf("claiming a core of chain %d: %w", p.ChainID, err)
		}
		row, err := one(q.BundleClaimNext(ctx, dbsqlc.BundleClaimNextParams{ChainID: p.ChainID, Now: p.Now}))
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return fmt.Errorf("claiming a bundle of chain %d: %w", p.ChainID, err)
		}
		b := bundleFromRow(row)
		rebuild := b.Version > 1 || b.Anchor == nil || ledger.AnchorStale(b.Anchor.Number, head)
		anchor := b.Anchor
		if rebuild {
			queued, err := one(q.BundleCountQueued(ctx, p.ChainID))
			if err != nil {
				return fmt.Errorf("counting queued bundles of chain %d: %w", p.ChainID, err)
			}
			a, _ := ledger.PickAnchor(p.Recent, ledger.AnchorOffset(int(queued-1), p.Cores))
			anchor = &a
		}
		anchorSlot, err := slotInt("anchor slot", anchor.Number)
		if err != nil {
			return fmt.Errorf("claiming bundle %d: %w", b.Number, err)
		}
		txs, err := q.BundleTxListRaw(ctx, b.ID)
		if err != nil {
			return fmt.Errorf("reading the transactions of bundle %d: %w", b.Number, err)
		}
		if len(txs) != b.TxCount {
			return fmt.Errorf("claiming bundle %d: %d transactions included, %d cut", b.Number, len(txs), b.TxCount)
		}
		wp := ledger.WorkPackage{
			Number: b.Number, Parent: b.Parent, Version: b.Version, Core: int(core), Anchor: *anchor,
			Txs: make([][]byte, len(txs)),
		}
		for i, t := range txs {
			wp.Txs[i] = t.Raw
		}
		pkg := ledger.PackageHash(b.Hash, wp.Version, wp.Core, wp.Anchor)
		n, err := q.BundleVersionInsert(ctx, dbsqlc.BundleVersionInsertParams{
			PackageHash: pkg.Hex(), BundleID: b.ID, Version: int32(b.Version), Core: core,
			AnchorSlot: anchorSlot, AnchorHash: anchor.Hash.Hex(), Now: p.Now,
		})
		if err != nil {
			return fmt.Errorf("recording package %s of bundle %d: %w", pkg.Hex(), b.Number, err)
		}
		if n != 1 {
			return fmt.Errorf("recording package %s of bundle %d: the hash is another bundle's or already guaranteed", pkg.Hex(), b.Number)
		}
		row, err = one(q.BundleMarkSubmitted(ctx, dbsqlc.BundleMarkSubmittedParams{
			Core: core, AnchorSlot: anchorSlot, AnchorHash: anchor.Hash.Hex(), Now: p.Now, ID: b.ID,
		}))
		if err != nil {
			return fmt.Errorf("marking bundle %d submitted: %w", b.Number, err)
		}
		if n, err := q.CoreAssign(ctx, dbsqlc.CoreAssignParams{BundleID: b.ID, Now: p.Now, ChainID: p.ChainID, Core: core}); err != nil {
			return fmt.Errorf("assigning core %d to bundle %d: %w", core, b.Number, err)
		} else if n != 1 {
			return fmt.Errorf("assigning core %d to bundle %d: the core is not free", core, b.Number)
		}
		claim = &BundleClaim{Bundle: bundleFromRow(row), Package: wp, Rebuilt: rebuild}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claim, nil
}

// BundleSubmitResultParams is the outcome of sending one claimed package.
type BundleSubmitResultParams struct {
	ChainID     int64
	PackageHash ledger.Hash
	// Err is what SubmitWorkPackage returned.
	Err error
	Now time.Time
	// MinBackoff and MaxBackoff bound the wait after a refusal: MinBackoff
	// doubled for each earlier refusal, at most MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// BundleSubmitResult records a submission's outcome on its version: nil is
// sent; an Indeterminate error is unknown and the bundle stays submitted
// (the guarantee timeout decides); a Transient or Deterministic one is
// refused: the bundle goes back to queued (if that package is still its
// current one), frees its core and waits the backoff. A G15 refusal
// (AnchorNotRecent) also clears the anchor, so the next claim rebuilds, and
// is retried at once.
func (s *Store) BundleSubmitResult(ctx context.Context, p BundleSubmitResultParams) error {
	pkg := p.PackageHash.Hex()
	outcome := BundleOutcomeSent
	class := ledger.Class(0)
	if p.Err != nil {
		class = ledger.ClassOf(p.Err)
		outcome = BundleOutcomeUnknown
		if class != ledger.Indeterminate {
			outcome = truncate(BundleOutcomeRefused+ledger.ReasonOf(p.Err), 300)
		}
	}
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		v, err := one(q.BundleVersionGet(ctx, dbsqlc.BundleVersionGetParams{PackageHash: pkg, ChainID: p.ChainID}))
		if err != nil {
			return fmt.Errorf("reading package %s: %w", pkg, err)
		}
		if _, err := q.BundleVersionSetOutcome(ctx, dbsqlc.BundleVersionSetOutcomeParams{Outcome: &outcome, PackageHash: pkg}); err != nil {
			return fmt.Errorf("recording the outcome of package %s: %w", pkg, err)
		}
		if p.Err == nil || class == ledger.Indeterminate {
			return wake(ctx, q, notify.BundleMonitor)
		}
		if _, err := q.CoreLockOf(ctx, dbsqlc.CoreLockOfParams{ChainID: p.ChainID, BundleIds: []int64{v.BundleID}}); err != nil {
			return fmt.Errorf("locking the core of bundle %d: %w", v.Number, err)
		}
		var failures int32
		if b, err := one(q.BundleGetByID(ctx, v.BundleID)); err != nil {
			return fmt.Errorf("reading bundle %d: %w", v.Number, err)
		} else {
			failures = b.SubmitFailures + 1
		}
		g15 := strings.HasPrefix(ledger.ReasonOf(p.Err), ledger.AnchorNotRecent)
		next := p.Now.Add(bundleBackoff(int(failures), p.MinBackoff, p.MaxBackoff))
		if g15 {
			next = p.Now
		}
		n, err := q.BundleSubmitRefused(ctx, dbsqlc.BundleSubmitRefusedParams{
			NextSubmitAt: next, ClearAnchor: g15, Now: p.Now, PackageHash: pkg,
		})
		if err != nil {
			return fmt.Errorf("requeueing bundle %d after a refused submission: %w", v.Number, err)
		}
		if n == 0 {
			return nil // no longer its current package (guaranteed, timed out)
		}
		if _, err := q.CoreFree(ctx, dbsqlc.CoreFreeParams{Now: p.Now, ChainID: p.ChainID, BundleIds: []int64{v.BundleID}}); err != nil {
			return fmt.Errorf("freeing the core of bundle %d: %w", v.Number, err)
		}
		return wake(ctx, q, notify.BundleSubmitter)
	})
}

// fitGas is the longest prefix of rows whose gas limits sum to at most
// limit (0: every row), at least the first row (the intake refuses a
// transaction above the block's gas limit), and whether the limit cut it
// short. A prefix, never a choice: skipping one of a sender's nonces for a
// later one would leave a nonce gap the chain refuses.
func fitGas(rows []dbsqlc.BundleTxLockForCutRow, limit uint64) ([]string, bool) {
	hashes := make([]string, 0, len(rows))
	var sum uint64
	for i, r := range rows {
		g := uint64(max(r.Gas, 0))
		if limit > 0 && i > 0 && sum+g > limit {
			return hashes, true
		}
		sum += g
		hashes = append(hashes, r.TxHash)
	}
	return hashes, false
}

// bundleBackoff is min(max, min×2^(failures−1)).
func bundleBackoff(failures int, minWait, maxWait time.Duration) time.Duration {
	d := minWait
	for i := 1; i < failures && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// BundleApplied counts what BundleApplyBlocks did.
type BundleApplied struct {
	// Blocks were applied; Skipped were at or below the processed slot.
	Blocks, Skipped int
	// Guaranteed, Accumulated and Finalized count bundles moved.
	Guaranteed, Accumulated, Finalized int
	// IgnoredGuarantees name a version of a bundle that already has a
	// guarantee, or is dropped, accumulated or final; UnknownGuarantees and
	// UnknownAccumulations name no package of the chain's. The caller logs
	// them; none changes anything.
	IgnoredGuarantees, UnknownGuarantees       int
	IgnoredAccumulations, UnknownAccumulations int
	// SkippedDropped and SkippedRequeued count pool transactions the chain
	// left out of their bundle's block: dropped (PoolDropSkipped), or back
	// in the pool for a nonce gap (queued, or pending when the gap is
	// filled) (pool_skipped.go); SkippedTxs lists them. UnknownSkipped
	// name no transaction of a bundle of the chain's.
	SkippedDropped, SkippedRequeued, UnknownSkipped int
	SkippedTxs                                      []SkippedPoolTx
}

// BundleApplyBlocks applies JAM blocks, oldest first, each in its own
// transaction under the chain's lock (every block since the last processed,
// never only the head: a guarantee or an accumulation in a skipped block
// would be lost). A block at or below the
// processed slot is skipped, so applying one twice is a no-op. In a block:
// a guarantee of any version of a queued or submitted bundle with no
// guarantee yet makes it guaranteed and frees its core (the first guarantee
// wins); then an accumulation of a guaranteed bundle makes it accumulated;
// then the transactions the chain left out of the accumulated bundles'
// blocks leave them (pool_skipped.go: dropped, or queued for a nonce gap);
// then accumulated bundles finalityDepth slots old are finalized; then the
// processed slot becomes the block's.
func (s *Store) BundleApplyBlocks(ctx context.Context, chainID int64, blocks []ledger.JAMBlock, finalityDepth uint64, now time.Time) (BundleApplied, error) {
	var total BundleApplied
	for _, blk := range blocks {
		slot, err := slotInt("block slot", blk.Slot)
		if err != nil {
			return total, fmt.Errorf("applying a block of chain %d: %w", chainID, err)
		}
		var got BundleApplied
		err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
			got = BundleApplied{}
			processed, err := lockChain(ctx, q, chainID, now)
			if err != nil {
				return err
			}
			if processed != nil && *processed >= slot {
				got.Skipped = 1
				return nil
			}
			freed := false
			for _, h := range blk.Guarantees {
				f, err := applyGuarantee(ctx, q, chainID, h, slot, now, &got)
				if err != nil {
					return err
				}
				freed = freed || f
			}
			for _, h := range blk.Accumulations {
				v, err := one(q.BundleVersionGet(ctx, dbsqlc.BundleVersionGetParams{PackageHash: h.Hex(), ChainID: chainID}))
				if errors.Is(err, ErrNotFound) {
					got.UnknownAccumulations++
					continue
				} else if err != nil {
					return fmt.Errorf("reading package %s: %w", h.Hex(), err)
				}
				n, err := q.BundleAccumulate(ctx, dbsqlc.BundleAccumulateParams{Slot: slot, Now: now, ID: v.BundleID})
				if err != nil {
					return fmt.Errorf("marking bundle %d accumulated: %w", v.Number, err)
				}
				if n == 1 {
					got.Accumulated++
				} else {
					got.IgnoredAccumulations++
				}
			}
			promoted, err := applySkipped(ctx, q, chainID, blk.Skipped, now, &got)
			if err != nil {
				return err
			}
			maxSlot := slot - int64(min(finalityDepth, math.MaxInt64))
			if finalityDepth > uint64(slot) {
				maxSlot = -1
			}
			n, err := q.BundleFinalize(ctx, dbsqlc.BundleFinalizeParams{Now: now, ChainID: chainID, MaxSlot: maxSlot})
			if err != nil {
				return fmt.Errorf("finalizing bundles of chain %d: %w", chainID, err)
			}
			got.Finalized = int(n)
			if _, err := q.BuilderChainSetProcessed(ctx, dbsqlc.BuilderChainSetProcessedParams{Slot: slot, Now: now, ChainID: chainID}); err != nil {
				return fmt.Errorf("recording slot %d processed: %w", slot, err)
			}
			got.Blocks = 1
			// A freed core may take the next bundle: the submitters hear of
			// it at the commit, once for the block.
			// So does a skipped transaction back to pending: the queuers.
			return wakeAll(ctx, q, wakeIf{freed, notify.BundleSubmitter}, wakeIf{promoted, notify.BundleQueuer})
		})
		if err != nil {
			return total, fmt.Errorf("applying block of slot %d: %w", blk.Slot, err)
		}
		total.Blocks += got.Blocks
		total.Skipped += got.Skipped
		total.Guaranteed += got.Guaranteed
		total.Accumulated += got.Accumulated
		total.Finalized += got.Finalized
		total.IgnoredGuarantees += got.IgnoredGuarantees
		total.UnknownGuarantees += got.UnknownGuarantees
		total.IgnoredAccumulations += got.IgnoredAccumulations
		total.UnknownAccumulations += got.UnknownAccumulations
		total.SkippedDropped += got.SkippedDropped
		total.SkippedRequeued += got.SkippedRequeued
		total.UnknownSkipped += got.UnknownSkipped
		total.SkippedTxs = append(total.SkippedTxs, got.SkippedTxs...)
	}
	return total, nil
}

// applyGuarantee applies one E_G entry: the first guarantee of a bundle wins.
// The bundle's core is locked before the bundle (lock order); the update is
// conditional on the core read, and read again if a claim moved it. It
// reports whether it freed a core.
func applyGuarantee(ctx context.Context, q *dbsqlc.Queries, chainID int64, h ledger.Hash, slot int64, now time.Time, got *BundleApplied) (bool, error) {
	for attempt := 0; attempt < 3; attempt++ {
		v, err := one(q.BundleVersionGet(ctx, dbsqlc.BundleVersionGetParams{PackageHash: h.Hex(), ChainID: chainID}))
		if errors.Is(err, ErrNotFound) {
			got.UnknownGuarantees++
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("reading package %s: %w", h.Hex(), err)
		}
		if st := BundleState(v.State); st != BundleQueued && st != BundleSubmitted {
			got.IgnoredGuarantees++
			return false, nil
		}
		if v.BundleCore != nil {
			if _, err := q.CoreLockOf(ctx, dbsqlc.CoreLockOfParams{ChainID: chainID, BundleIds: []int64{v.BundleID}}); err != nil {
				return false, fmt.Errorf("locking the core of bundle %d: %w", v.Number, err)
			}
		}
		n, err := q.BundleGuarantee(ctx, dbsqlc.BundleGuaranteeParams{
			PackageHash: h.Hex(), Version: v.Version, Now: now, ID: v.BundleID, Core: v.BundleCore,
		})
		if err != nil {
			return false, fmt.Errorf("marking bundle %d guaranteed: %w", v.Number, err)
		}
		if n == 0 {
			continue // its state or core moved since the read: read again
		}
		if v.BundleCore != nil {
			if _, err := q.CoreFree(ctx, dbsqlc.CoreFreeParams{Now: now, ChainID: chainID, BundleIds: []int64{v.BundleID}}); err != nil {
				return false, fmt.Errorf("freeing the core of bundle %d: %w", v.Number, err)
			}
		}
		if _, err := q.BundleVersionSetGuaranteed(ctx, dbsqlc.BundleVersionSetGuaranteedParams{Slot: slot, PackageHash: h.Hex()}); err != nil {
			return false, fmt.Errorf("recording the guarantee of package %s: %w", h.Hex(), err)
		}
		got.Guaranteed++
		return v.BundleCore != nil, nil
	}
	got.IgnoredGuarantees++
	return false, nil
}

// BundleProcessedSlot returns the slot of the last JAM block applied to the
// chain; ok is false before the first.
func (s *Store) BundleProcessedSlot(ctx context.Context, chainID int64) (slot uint64, ok bool, err error) {
	processed, err := one(s.q.BuilderChainGet(ctx, chainID))
	if errors.Is(err, ErrNotFound) || (err == nil && processed == nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the processed slot of chain %d: %w", chainID, err)
	}
	return uint64(*processed), true, nil
}

// BundleRequeue is the requeue after a guarantee timeout, with its race
// closed where it happens: one conditional UPDATE moves the bundle back
// to queued with version+1 and no anchor (the next claim rebuilds) only while
// version is still the submitted one and no version of it is guaranteed; its
// core is freed in the same transaction. False when that guard failed (a
// guarantee arrived, or another process requeued it).
func (s *Store) BundleRequeue(ctx context.Context, chainID int64, id int64, version int, now time.Time) (bool, error) {
	var done bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		var err error
		done, err = bundleRequeue(ctx, q, chainID, id, version, now)
		return err
	})
	return done, err
}

func bundleRequeue(ctx context.Context, q *dbsqlc.Queries, chainID, id int64, version int, now time.Time) (bool, error) {
	if _, err := q.CoreLockOf(ctx, dbsqlc.CoreLockOfParams{ChainID: chainID, BundleIds: []int64{id}}); err != nil {
		return false, fmt.Errorf("locking the core of bundle %d: %w", id, err)
	}
	n, err := q.BundleRequeue(ctx, dbsqlc.BundleRequeueParams{Now: now, ID: id, ChainID: chainID, Version: int32(version)})
	if err != nil {
		return false, fmt.Errorf("requeueing bundle %d: %w", id, err)
	}
	if n == 0 {
		return false, nil
	}
	if _, err := q.CoreFree(ctx, dbsqlc.CoreFreeParams{Now: now, ChainID: chainID, BundleIds: []int64{id}}); err != nil {
		return false, fmt.Errorf("freeing the core of bundle %d: %w", id, err)
	}
	return true, wake(ctx, q, notify.BundleSubmitter)
}

// BundleRetryTimedOutParams is one guarantee-timeout round.
type BundleRetryTimedOutParams struct {
	ChainID int64
	Now     time.Time
	// Timeout is the guarantee timeout (18 s by default) counted from the claim.
	Timeout time.Duration
	// MaxVersions is the retry limit (3 by default): a bundle past it is dropped.
	MaxVersions int
	// HeadSlot is the chain's newest slot.
	HeadSlot uint64
}

// BundleRetryTimedOutResult names (by number) the bundles a round requeued and
// dropped (a cascade's included).
type BundleRetryTimedOutResult struct {
	Requeued, Dropped []uint64
}

// bundleTimeoutBatch bounds the bundles one round looks at.
const bundleTimeoutBatch = 1000

// BundleRetryTimedOut is the guarantee timeout: a bundle submitted longer
// than Timeout is requeued as version+1 (BundleRequeue) while its version is
// below MaxVersions. At MaxVersions it is dropped, but only once no version
// can be guaranteed any more: every version's anchor has left the recent
// history at HeadSlot and at the processed slot (blocks up to it applied, so
// no unapplied block can hold a guarantee for it); until then it keeps its
// core. Dropping bundle N also drops every live bundle above N that has not
// executed (their parent never will), frees their cores and returns all
// their transactions to pending, in one transaction under the chain's lock:
// nothing is deleted and no transaction is lost.
func (s *Store) BundleRetryTimedOut(ctx context.Context, p BundleRetryTimedOutParams) (BundleRetryTimedOutResult, error) {
	var res BundleRetryTimedOutResult
	if p.MaxVersions < 1 {
		return res, fmt.Errorf("bundle timeouts: max versions %d must be at least 1", p.MaxVersions)
	}
	rows, err := s.q.BundleListTimedOut(ctx, dbsqlc.BundleListTimedOutParams{
		ChainID: p.ChainID, Before: p.Now.Add(-p.Timeout), Max: bundleTimeoutBatch,
	})
	if err != nil {
		return res, fmt.Errorf("reading timed-out bundles of chain %d: %w", p.ChainID, err)
	}
	for _, r := range rows {
		if int(r.Version) < p.MaxVersions {
			ok, err := s.BundleRequeue(ctx, p.ChainID, r.ID, int(r.Version), p.Now)
			if err != nil {
				return res, err
			}
			if ok {
				res.Requeued = append(res.Requeued, uint64(r.Number))
			}
			continue
		}
		dropped, err := s.bundleDrop(ctx, p, r)
		if err != nil {
			return res, err
		}
		res.Dropped = append(res.Dropped, dropped...)
	}
	return res, nil
}

// bundleDrop drops a bundle past the retry limit whose versions can no
// longer be guaranteed, with its cascade; nothing when that does not hold.
func (s *Store) bundleDrop(ctx context.Context, p BundleRetryTimedOutParams, r dbsqlc.BundleListTimedOutRow) ([]uint64, error) {
	var dropped []uint64
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		dropped = nil
		processed, err := lockChain(ctx, q, p.ChainID, p.Now)
		if err != nil {
			return err
		}
		if processed == nil {
			return nil
		}
		head := min(p.HeadSlot, uint64(*processed))
		if !ledger.AnchorExpired(uint64(r.MaxAnchorSlot), head) {
			return nil
		}
		ids, err := q.BundleListToDrop(ctx, dbsqlc.BundleListToDropParams{ChainID: p.ChainID, Number: r.Number})
		if err != nil {
			return fmt.Errorf("reading the bundles from %d up: %w", r.Number, err)
		}
		if _, err := q.CoreLockOf(ctx, dbsqlc.CoreLockOfParams{ChainID: p.ChainID, BundleIds: ids}); err != nil {
			return fmt.Errorf("locking the cores of bundles from %d up: %w", r.Number, err)
		}
		n, err := q.BundleDrop(ctx, dbsqlc.BundleDropParams{
			Reason: fmt.Sprintf("no guarantee after %d versions", r.Version), Now: p.Now, ID: r.ID, Version: r.Version,
		})
		if err != nil {
			return fmt.Errorf("dropping bundle %d: %w", r.Number, err)
		}
		if n == 0 {
			return nil // guaranteed or requeued meanwhile
		}
		dropped = append(dropped, uint64(r.Number))
		var others []int64
		for _, id := range ids {
			if id != r.ID {
				others = append(others, id)
			}
		}
		rows, err := q.BundleDropMany(ctx, dbsqlc.BundleDropManyParams{
			Reason: fmt.Sprintf("predecessor %d dropped", r.Number), Now: p.Now, Ids: others,
		})
		if err != nil {
			return fmt.Errorf("dropping the bundles above %d: %w", r.Number, err)
		}
		all := []int64{r.ID}
		for _, row := range rows {
			all = append(all, row.ID)
			dropped = append(dropped, uint64(row.Number))
		}
		if _, err := q.CoreFree(ctx, dbsqlc.CoreFreeParams{Now: p.Now, ChainID: p.ChainID, BundleIds: all}); err != nil {
			return fmt.Errorf("freeing the cores of dropped bundles: %w", err)
		}
		returned, err := q.BundleTxReturn(ctx, dbsqlc.BundleTxReturnParams{Now: p.Now, BundleIds: all})
		if err != nil {
			return fmt.Errorf("returning the transactions of dropped bundles to the pool: %w", err)
		}
		if err := poolAdjust(ctx, q, p.ChainID, returned, 0); err != nil {
			return err
		}
		return wakeAll(ctx, q, wakeIf{true, notify.BundleSubmitter}, wakeIf{true, notify.BundleQueuer})
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}

// BundleHeads are the chain's newest executed bundle (accumulated or
// finalized) and newest finalized one; 0 for none.
type BundleHeads struct {
	Executed, Finalized uint64
}

// BundleHeads returns the chain's BundleHeads.
func (s *Store) BundleHeads(ctx context.Context, chainID int64) (BundleHeads, error) {
	r, err := one(s.q.BundleHeads(ctx, chainID))
	if err != nil {
		return BundleHeads{}, fmt.Errorf("reading the newest executed bundle of chain %d: %w", chainID, err)
	}
	return BundleHeads{Executed: uint64(r.Executed), Finalized: uint64(r.Finalized)}, nil
}

// BundleGet returns the chain's live bundle numbered number, else the newest
// dropped one, or ErrNotFound.
func (s *Store) BundleGet(ctx context.Context, chainID int64, number uint64) (Bundle, error) {
	n, err := slotInt("bundle number", number)
	if err != nil {
		return Bundle{}, fmt.Errorf("reading bundle: %w", ErrNotFound)
	}
	row, err := one(s.q.BundleGet(ctx, dbsqlc.BundleGetParams{ChainID: chainID, Number: n}))
	if err != nil {
		return Bundle{}, fmt.Errorf("reading bundle %d of chain %d: %w", number, chainID, err)
	}
	return bundleFromRow(row), nil
}

// BundleListParams selects bundles.
type BundleListParams struct {
	ChainID int64
	// State filters by state; "" lists every state.
	State BundleState
	// After lists numbers above it.
	After uint64
	Limit int
}

// BundleList returns the chain's bundles by number (a number cut again after
// a drop: the dropped one first).
func (s *Store) BundleList(ctx context.Context, p BundleListParams) ([]Bundle, error) {
	after, err := slotInt("after", p.After)
	if err != nil {
		return nil, fmt.Errorf("listing bundles: %w", err)
	}
	arg := dbsqlc.BundleListParams{ChainID: p.ChainID, After: after, Max: int32(min(max(p.Limit, 0), math.MaxInt32))}
	if p.State != "" {
		st := dbsqlc.LedgerqBundleState(p.State)
		arg.State = &st
	}
	rows, err := s.q.BundleList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("listing bundles of chain %d: %w", p.ChainID, err)
	}
	return fromRows(rows, bundleFromRow), nil
}

// BundleTxListHashes returns the hashes of the transactions a bundle holds, in
// execution order (none for a dropped bundle: they are back in the pool).
func (s *Store) BundleTxListHashes(ctx context.Context, bundleID int64) ([]ledger.Hash, error) {
	rows, err := s.q.BundleTxListRaw(ctx, bundleID)
	if err != nil {
		return nil, fmt.Errorf("reading the transactions of bundle %d: %w", bundleID, err)
	}
	out := make([]ledger.Hash, len(rows))
	for i, r := range rows {
		out[i] = hashFromHex(r.TxHash)
	}
	return out, nil
}

// BundleVersionList returns every package claimed for a bundle, by version.
func (s *Store) BundleVersionList(ctx context.Context, bundleID int64) ([]BundleVersion, error) {
	rows, err := s.q.BundleVersionList(ctx, bundleID)
	if err != nil {
		return nil, fmt.Errorf("reading the versions of bundle %d: %w", bundleID, err)
	}
	return fromRows(rows, bundleVersionFromRow), nil
}

// BundleDeleteFinished deletes up to max finalized bundles, with their work
// packages and transactions, and up to max dropped ones, with their work
// packages, that ended before before, oldest first (the builder lane's
// retention), and returns how many rows it deleted. A bundle still in
// flight, and each chain's newest finalized bundle, are kept.
func (s *Store) BundleDeleteFinished(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.BundleDeleteFinished(ctx, dbsqlc.BundleDeleteFinishedParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting finished bundles: %w", err)
	}
	return n, nil
}
