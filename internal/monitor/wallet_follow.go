package monitor

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// followPage is how many wallets one WalletFollower query lists.
const followPage = 500

// WalletFollower brings wallet shards back while they have work the chain
// must finish ("requeue the job while work remains"). A run whose attempts
// are sent but not yet mined ends (a collect with nothing to do now ends the
// run: no spinning), so every wallet.Config.FollowInterval the follower
// schedules the shard of every configured wallet with attempts in
// flight or waiting tasks; its next run confirms what was mined and sends
// what the budget allows. Scheduling a pending shard changes nothing and a
// running one is queued again after its run, so any number of processes
// may run a follower. It is a loop.Service.
type WalletFollower struct {
	*loop.Loop
	cfg     wallet.Config
	store   *store.Store
	wallets *keystore.Registry

	// OnScheduled, when set, is called after a round queued shards (this
	// process's Scheduler.Poke; other processes hear the NOTIFY). Set it before
	// Start.
	OnScheduled func()
}

// NewWalletFollower returns the wallet shards' follower; cfg gets its
// defaults (wallet.Config.WithDefaults).
func NewWalletFollower(st *store.Store, wallets *keystore.Registry, cfg wallet.Config) (*WalletFollower, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &WalletFollower{cfg: cfg, store: st, wallets: wallets}
	f.Loop = loop.NewService("wallet_follower", cfg.FollowInterval, loop.Deps{Clock: cfg.Clock, Logger: cfg.Logger}, 0, f.RunOnce)
	return f, nil
}

// RunOnce schedules the shard of every configured wallet with attempts in
// flight or waiting tasks and returns how many it moved from idle to
// pending. Tests call it directly.
func (f *WalletFollower) RunOnce(ctx context.Context) (int, error) {
	queued := 0
	var after store.WalletKey
	watchSince := f.cfg.Clock.Now().Add(-f.cfg.WatchAfter)
	for {
		page, err := wallet.Within(ctx, f.cfg.DBTimeout, func(ctx context.Context) ([]store.WalletKey, error) {
			return f.store.WalletListWithWork(ctx, store.WalletListWithWorkParams{After: after, WatchSince: watchSince, Max: followPage})
		})
		if err != nil {
			return queued, err
		}
		for _, w := range page {
			if !common.IsHexAddress(w.Sender) {
				continue
			}
			if _, ok := f.wallets.BySender(w.ChainID, ledger.Address(common.HexToAddress(w.Sender))); !ok {
				continue
			}
			key := store.WalletShardKey(w.ChainID, w.Sender)
			res, err := wallet.Within(ctx, f.cfg.DBTimeout, func(ctx context.Context) (store.ShardScheduled, error) {
				return f.store.ShardSchedule(ctx, store.ShardScheduleParams{Now: f.cfg.Clock.Now(), Key: key})
			})
			if err != nil {
				return queued, fmt.Errorf("following %s: %w", key, err)
			}
			if res == store.ShardQueued {
				queued++
			}
		}
		if len(page) < followPage {
			break
		}
		after = page[len(page)-1]
	}
	if queued > 0 && f.OnScheduled != nil {
		f.OnScheduled()
	}
	return queued, nil
}

// WalletHeadWatcher runs the follower as soon as the chain has a new block:
// every wallet.Config.HeadInterval it reads the chain's head (one call per
// process, whatever the number of wallets) and, when the head moved, calls
// OnNewHead (the follower's Poke). A wallet with transactions in flight so
// looks for their receipts within HeadInterval of the block that holds
// them, instead of up to a FollowInterval later, and sends the tasks the
// freed in-flight budget allows; FollowInterval's rounds go on beside it
// for everything a head does not tell (a node that stops answering, a
// watched wallet). It is a loop.Service.
type WalletHeadWatcher struct {
	*loop.Loop
	cfg       wallet.Config
	ledger    ledger.WalletLedger
	onNewHead func()
	// OnHead, when set, is told every head read (wallet.Job.NoteHead).
	OnHead func(ledger.BlockRef)
	// head is the last head read; known: one was read.
	head  uint64
	known bool
}

// NewWalletHeadWatcher returns the head watcher of led; onNewHead is called
// from its loop when the head moved.
func NewWalletHeadWatcher(led ledger.WalletLedger, cfg wallet.Config, onNewHead func()) (*WalletHeadWatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HeadInterval <= 0 {
		return nil, fmt.Errorf("wallet head watcher: head interval must be positive, got %s", cfg.HeadInterval)
	}
	h := &WalletHeadWatcher{cfg: cfg, ledger: led, onNewHead: onNewHead}
	h.Loop = loop.NewService("wallet_head_watcher", cfg.HeadInterval, loop.Deps{Clock: cfg.Clock, Logger: cfg.Logger}, 0, h.RunOnce)
	return h, nil
}

// RunOnce reads the head and returns 1 when it moved since the last read
// (the first read only records it). Tests call it directly.
func (h *WalletHeadWatcher) RunOnce(ctx context.Context) (int, error) {
	head, err := wallet.Within(ctx, h.cfg.LedgerTimeout, h.ledger.HeadBlock)
	if err != nil {
		return 0, fmt.Errorf("reading the chain's head: %w", err)
	}
	if h.OnHead != nil {
		h.OnHead(head)
	}
	moved := h.known && head.Number != h.head
	h.head, h.known = head.Number, true
	if !moved {
		return 0, nil
	}
	h.onNewHead()
	return 1, nil
}
