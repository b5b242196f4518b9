package wallet

import (
	"context"
	"log/slog"

	"github.com/ledgerq/ledgerq/internal/workers"
)

// Router is the wallet shard's workers.Job when the lane serves several
// chains: it hands each claimed shard to the Job of the chain its key names
// ("wallet:<chain>:<address>"), each Job with its chain's ledger and
// configuration.
type Router struct {
	jobs   map[int64]*Job
	logger *slog.Logger
}

var _ workers.Job = (*Router)(nil)

// NewRouter returns the router over jobs, by chain id.
func NewRouter(jobs map[int64]*Job, logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Router{jobs: jobs, logger: logger}
}

// Collect implements workers.Job: the shard's chain's Job collects. A shard
// of a chain this process does not serve (configuration changed) collects
// nothing: its tasks wait.
func (r *Router) Collect(ctx context.Context, c workers.Claim) (workers.Cycle, error) {
	chainID, _, err := parseKey(c.Key)
	if err != nil {
		return nil, err
	}
	j, ok := r.jobs[chainID]
	if !ok {
		r.logger.Warn("wallet job: no configured chain for shard, its tasks wait", "shard", c.Key)
		return nil, nil
	}
	return j.Collect(ctx, c)
}
