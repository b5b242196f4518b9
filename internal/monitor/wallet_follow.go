package monitor

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// followPage is how many wallets one WalletFollower query lists.
const followPage = 500

// WalletFollower brings wallet shards back while they have work the chain
// must finish ("requeue the job while work remains"). A run whose attempts
// are sent but not yet mined ends (a collect with nothing to do now ends the
// run: no spinning), so every WalletConfig.FollowInterval the follower
// schedules the shard of every configured wallet with attempts in
// flight or waiting tasks; its next run confirms what was mined and sends
// what the budget allows. Scheduling a pending shard changes nothing and a
// running one is queued again after its run, so any number of processes
// may run a follower. It is a loop.Service.
type WalletFollower struct {
	*loop.Loop
	cfg     workers.WalletConfig
	store   *store.Store
	wallets *keystore.Registry

	// OnScheduled, when set, is called after a round queued shards (this
	// process's Scheduler.Poke; other processes hear the NOTIFY). Set it before
	// Start.
	OnScheduled func()
}

// NewWalletFollower returns the wallet shards' follower.
func NewWalletFollower(st *store.Store, wallets *keystore.Registry, cfg workers.WalletConfig) (*WalletFollower, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
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
		page, err := workers.Within(ctx, f.cfg.DBTimeout, func(ctx context.Context) ([]store.WalletKey, error) {
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
			res, err := workers.Within(ctx, f.cfg.DBTimeout, func(ctx context.Context) (store.ShardScheduled, error) {
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
