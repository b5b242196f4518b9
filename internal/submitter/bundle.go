package submitter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BundleSubmitter submits queued bundles to the JAM chain (the builder's
// queue runner): inside the submission window only, lowest block number first, at
// most one bundle per free core — cores are rows claimed with SKIP LOCKED, so
// the limit holds across processes. store.BundleClaim takes the core, builds
// the version's work package (rebuilding it on a fresh anchor when its anchor
// is stale or the version is above 1) and records it, in one transaction;
// the chain call comes after the commit, and its outcome is recorded after.
type BundleSubmitter struct {
	*loop.Loop
	cfg    builder.Config
	store  *store.Store
	ledger ledger.BundleLedger
	deps   loop.Deps

	info *ledger.ChainInfo // read once; only the loop's goroutine touches it
}

// NewBundleSubmitter returns the builder lane's submitter, cfg and deps
// with their defaults, or the first setting that cannot work.
func NewBundleSubmitter(st *store.Store, l ledger.BundleLedger, deps loop.Deps, cfg builder.Config) (*BundleSubmitter, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &BundleSubmitter{cfg: cfg, store: st, ledger: l, deps: deps}
	s.Loop = loop.NewService("bundle_submitter", deps.PollInterval, deps, 0, s.RunOnce)
	return s, nil
}

// Window returns the submission window around now: it opens open before
// the next timeslot and closes close before it. In reports whether now is
// inside; next is when the next window opens (now, when inside).
func Window(info ledger.ChainInfo, now time.Time, open, close time.Duration) (in bool, next time.Time) {
	slot := info.Slot(now)
	for s := slot + 1; ; s++ {
		start := info.SlotStart(s)
		from, to := start.Add(-open), start.Add(-close)
		switch {
		case now.Before(from):
			return false, from
		case now.Before(to):
			return true, now
		}
	}
}

// windowBounds returns the configured window, or jamduna's (3 s and 1 s
// before a 6 s slot) scaled to the chain's slot length.
func (s *BundleSubmitter) windowBounds(slot time.Duration) (open, close time.Duration) {
	open, close = s.cfg.WindowOpen, s.cfg.WindowClose
	if open <= 0 {
		open = slot / 2
	}
	if close <= 0 {
		close = slot / 6
	}
	return open, close
}

// RunOnce submits what the window and the free cores allow and returns how
// many bundles it submitted.
func (s *BundleSubmitter) RunOnce(ctx context.Context) (int, error) {
	if s.info == nil {
		lctx, cancel := context.WithTimeout(ctx, s.cfg.Ledger.Timeout)
		info, err := s.ledger.Info(lctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("reading the chain's info: %w", err)
		}
		s.info = &info
	}
	open, close := s.windowBounds(s.info.SlotLength)
	// Claim first, for every free core, then send the claimed packages
	// side by side: the last core's package is not held back behind the
	// chain calls of the others, near the window's end.
	var claims []*store.BundleClaim
	var recent []ledger.BlockRef
	var claimErr error
	for range s.cfg.Cores {
		// Each claim inside the window: a round slowed by the database or
		// the chain stops when the window closes, rather than send a
		// package into the next slot, where the anchor picked for this one
		// may leave the recent blocks before the guarantee.
		now := s.deps.Clock.Now()
		if in, next := Window(*s.info, now, open, close); !in {
			s.PokeAfter(next.Sub(now))
			break
		}
		if recent == nil {
			lctx, cancel := context.WithTimeout(ctx, s.cfg.Ledger.Timeout)
			r, err := s.ledger.RecentBlocks(lctx)
			cancel()
			if err != nil {
				claimErr = fmt.Errorf("reading the chain's recent blocks: %w", err)
				break
			}
			recent = r
		}
		claim, err := s.claim(ctx, recent)
		if err != nil || claim == nil {
			claimErr = err
			break
		}
		claims = append(claims, claim)
	}
	sendErrs := make([]error, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() { sendErrs[i] = s.send(ctx, c) })
	}
	wg.Wait()
	sent := 0
	errs := []error{claimErr}
	for i, c := range claims {
		err := s.record(ctx, c, sendErrs[i])
		if err == nil {
			sent++
		}
		errs = append(errs, err)
	}
	return sent, errors.Join(errs...)
}

func (s *BundleSubmitter) claim(ctx context.Context, recent []ledger.BlockRef) (*store.BundleClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, s.deps.DBTimeout)
	defer cancel()
	return s.store.BundleClaim(ctx, store.BundleClaimParams{
		ChainID: s.cfg.Pool.ChainID, Recent: recent, Cores: s.cfg.Cores, Now: s.deps.Clock.Now(),
	})
}

// send sends one claimed version to the chain and returns its answer,
// which record stores. A crash between the claim and the record leaves the
// bundle submitted: the guarantee timeout requeues it, as for a package the
// guarantors lost.
func (s *BundleSubmitter) send(ctx context.Context, c *store.BundleClaim) error {
	wp := c.Package
	lctx, cancel := context.WithTimeout(ctx, s.cfg.Ledger.Timeout)
	began := time.Now()
	sendErr := s.ledger.SubmitWorkPackage(lctx, wp)
	cancel()
	s.deps.Metrics.LedgerCall("bundle", "submit", time.Since(began), sendErr, nil)
	return sendErr
}

// record logs and stores what the chain said to a claimed version.
func (s *BundleSubmitter) record(ctx context.Context, c *store.BundleClaim, sendErr error) error {
	wp := c.Package
	hash := c.PackageHash()
	log := s.deps.Logger.With("chain_id", s.cfg.Pool.ChainID, "block", wp.Number, "version", wp.Version, "core", wp.Core,
		"package", hash.Hex(), "anchor_slot", wp.Anchor.Number, "rebuilt", c.Rebuilt)
	switch {
	case sendErr == nil:
		log.Info("bundle submitted")
	case ledger.ClassOf(sendErr) == ledger.Indeterminate:
		log.Warn("bundle submit answer lost: counted as submitted", "error", sendErr)
	default:
		log.Warn("bundle submit refused", "class", ledger.ClassOf(sendErr), "error", sendErr)
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), s.deps.DBTimeout)
	defer dcancel()
	err := s.store.BundleSubmitResult(dctx, store.BundleSubmitResultParams{
		ChainID: s.cfg.Pool.ChainID, PackageHash: hash, Err: sendErr, Now: s.deps.Clock.Now(),
		MinBackoff: s.cfg.SubmitBackoff, MaxBackoff: s.cfg.SubmitBackoffMax,
	})
	if err != nil {
		return fmt.Errorf("recording the submit of bundle %d v%d: %w", wp.Number, wp.Version, err)
	}
	if sendErr == nil || ledger.ClassOf(sendErr) == ledger.Indeterminate {
		s.deps.Metrics.Transition("bundle", string(store.BundleSubmitted), 1)
	} else {
		s.deps.Metrics.Transition("bundle", "submit_refused", 1)
	}
	return nil
}
