package workers

import (
	"context"
	"log/slog"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// rescueMax is the most shards one Rescuer round puts back; a full round is
// followed by another at once.
const rescueMax = 100

// Rescuer is the monitor side of the shards: every RescueInterval it puts
// running shards whose holder is gone back to pending, at the back of the
// queue, and wakes the workers. A holder is gone when the liveness lock of
// its process (store.Liveness), recorded by its claim, is no longer held
// (the process died: its shards move on within a round), or when its lease
// expired (it hung, or claimed without a liveness lock). The old worker's
// late release, lease extension or fenced commit then changes nothing. Any
// number of processes may run it.
type Rescuer struct {
	*loop.Loop
	cfg   Config
	store *store.Store
	deps  loop.Deps

	// OnRescued, when set, is called after a round rescued shards (this
	// process's Scheduler.Poke). Set it before Start.
	OnRescued func()
}

// NewRescuer returns the shards' rescuer. It needs no NOTIFY channel.
func NewRescuer(st *store.Store, deps loop.Deps, cfg Config) *Rescuer {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Rescuer{cfg: cfg, store: st, deps: deps}
	r.Loop = loop.NewService("shard_rescuer", cfg.RescueInterval, deps, rescueMax, r.RunOnce)
	return r
}

// RunOnce rescues up to rescueMax shards whose holder is gone and returns
// how many it rescued.
func (r *Rescuer) RunOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DBTimeout)
	defer cancel()
	rescued, err := r.store.ShardRescue(ctx, store.ShardRescueParams{Now: r.deps.Clock.Now(), Max: rescueMax})
	if err != nil {
		return 0, err
	}
	var died, expired []string
	for _, s := range rescued {
		if s.HolderDied {
			died = append(died, s.Key)
		} else {
			expired = append(expired, s.Key)
		}
	}
	if len(died) > 0 {
		r.deps.Logger.Warn("shard rescuer: holders' processes gone, shards queued again", "shards", len(died), "keys", died)
	}
	if len(expired) > 0 {
		r.deps.Logger.Warn("shard rescuer: leases expired, shards queued again", "shards", len(expired), "keys", expired)
	}
	if len(rescued) > 0 && r.OnRescued != nil {
		r.OnRescued()
	}
	return len(rescued), nil
}
