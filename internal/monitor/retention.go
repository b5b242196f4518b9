package monitor

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// RetentionConfig configures a Retention.
type RetentionConfig struct {
	// Interval is the wait between rounds once the backlog is cleared; a
	// round that deleted a full BatchSize is followed by another at once.
	Interval time.Duration
	// DBTimeout bounds each round's delete.
	DBTimeout time.Duration
	// Age is how long a finished row is kept after it finished. Zero (or
	// less) turns retention off: rounds delete nothing and never touch the
	// database, so every row is kept.
	Age time.Duration
	// BatchSize is the most rows one round deletes (one statement, one
	// short transaction); it must be at least 1 when Age is set.
	BatchSize int
}

// Retention deletes one lane's finished rows (or the operators' records:
// NewAccessRetention) that finished more than their age ago, BatchSize of
// each kind at a time, so that the tables and indexes stay flat under churn
// (docs/operations.md, "Retention"). A row that has not finished is never
// deleted, whatever its age. Several processes may run it at once: each
// round skips the rows another round holds.
type Retention struct {
	*loop.Loop
	cfg   RetentionConfig
	lane  string
	rules []retentionRule
	deps  loop.Deps
}

// retentionRule is one kind of row a Retention deletes: those that ended
// more than age before the round (age zero: before it), up to BatchSize a
// round, by delete.
type retentionRule struct {
	age    time.Duration
	delete func(ctx context.Context, before time.Time, max int) (int64, error)
}

// NewBatchRetention returns the batch lane's retention service: terminal
// batches (committed, valid, invalid). It needs no
// NOTIFY channel: deps.Wake may be nil.
//
// cfg and deps get their defaults; it returns the first setting that
// cannot work.
func NewBatchRetention(st *store.Store, deps loop.Deps, cfg batch.Config) (*Retention, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := RetentionConfig{Interval: cfg.RetentionInterval, DBTimeout: deps.DBTimeout, Age: cfg.RetentionAge, BatchSize: cfg.RetentionBatchSize}
	return newRetention("batch", deps, rc, func(ctx context.Context, cutoff time.Time, max int) (int64, error) {
		n, err := st.BatchDeleteFinished(ctx, store.BatchDeleteFinishedParams{Cutoff: cutoff, Max: max})
		return int64(n), err
	}), nil
}

// NewBuilderRetention returns the builder lane's retention service:
// bundles that ended (finalized ones with their work packages and
// transactions, dropped ones with their work packages; a chain's newest
// finalized bundle is kept) and pool transactions that ended (replaced,
// dropped), each up to BatchSize a round; a round counts the rows of both.
// A pending, queued or included transaction and a bundle in flight are
// never deleted. It needs no NOTIFY channel: deps.Wake may be nil.
//
// cfg and deps get their defaults; it returns the first setting that
// cannot work.
func NewBuilderRetention(st *store.Store, deps loop.Deps, cfg builder.Config) (*Retention, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := RetentionConfig{Interval: cfg.RetentionInterval, DBTimeout: deps.DBTimeout, Age: cfg.RetentionAge, BatchSize: cfg.RetentionBatchSize}
	return newRetention("builder", deps, rc, st.BundleDeleteFinished, st.PoolTxDeleteFinished), nil
}

// NewWebhookRetention returns the retention of the wallets' webhook
// deliveries: those delivered or given up more than cfg.Age ago, up to
// BatchSize a round. A delivery still due or being retried is never
// deleted.
func NewWebhookRetention(st *store.Store, deps loop.Deps, cfg RetentionConfig) *Retention {
	return newRetention("webhook", deps, cfg, st.WebhookDeliveryDeleteEnded)
}

// AccessRetentionConfig configures the retention of the operators' records
// (NewAccessRetention): the audit of their actions and the console's
// sessions. Its tags declare the settings an operator sets
// (internal/config): flags --audit-retention-age and --access-retention-*.
type AccessRetentionConfig struct {
	// AuditAge is how long an audit row is kept after it was written (0:
	// forever).
	AuditAge time.Duration `flag:"audit-retention-age" help:"delete audit rows (ledgerq.audit_log, the operators' actions) older than this (0: keep them forever); run by the monitor role"`
	// BatchSize is the most audit rows, and the most ended console
	// sessions, one round deletes.
	BatchSize int `flag:"access-retention-batch-size" help:"most audit rows, and most expired or logged-out console sessions, deleted in one statement"`
	// Interval is the wait after a round that found less than a full
	// batch to delete.
	Interval time.Duration `flag:"access-retention-interval" help:"wait after an audit and console session retention round that found less than a full batch to delete"`
}

// AccessRetentionDefaults returns the access retention's defaults: audit
// rows kept 90 days.
func AccessRetentionDefaults() AccessRetentionConfig {
	return AccessRetentionConfig{AuditAge: 90 * 24 * time.Hour, BatchSize: 1000, Interval: time.Minute}
}

// WithDefaults returns c with BatchSize and Interval set to their defaults
// where zero (AuditAge 0 is a setting of its own: keep the audit forever).
func (c AccessRetentionConfig) WithDefaults() AccessRetentionConfig {
	d := AccessRetentionDefaults()
	c.BatchSize = cmp.Or(c.BatchSize, d.BatchSize)
	c.Interval = cmp.Or(c.Interval, d.Interval)
	return c
}

// Validate reports the first setting that cannot work, naming its flag.
func (c AccessRetentionConfig) Validate() error {
	switch {
	case c.AuditAge < 0:
		return errors.New("--audit-retention-age must not be negative (0 keeps the audit forever)")
	case c.BatchSize < 1 || c.Interval <= 0:
		return errors.New("--access-retention-batch-size must be at least 1 and --access-retention-interval positive")
	}
	return nil
}

// NewAccessRetention returns the retention of the operators' records:
// console sessions that expired or were logged out (they open nothing any
// more; a session that can still open the console is never deleted), and
// audit rows written more than AuditAge ago (none with AuditAge 0), each up
// to BatchSize a round; a round counts the rows of both. It runs whatever
// the lanes: the console and the audit are every lane's.
//
// cfg and deps get their defaults; it returns the first setting that
// cannot work.
func NewAccessRetention(st *store.Store, deps loop.Deps, cfg AccessRetentionConfig) (*Retention, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := RetentionConfig{Interval: cfg.Interval, DBTimeout: deps.DBTimeout, BatchSize: cfg.BatchSize}
	rules := []retentionRule{{delete: st.ConsoleSessionDeleteEnded}}
	if cfg.AuditAge > 0 {
		rules = append(rules, retentionRule{age: cfg.AuditAge, delete: st.AuditDeleteOld})
	}
	return newRetentionRules("access", deps, rc, rules), nil
}

// NewTaskRetention returns the wallet lane's retention service: send-tx
// tasks that ended (done or error), with their transaction attempts, and
// the wallets' policy refusals recorded before the same cutoff, each up to
// BatchSize a round; a round counts the rows of both.
func NewTaskRetention(st *store.Store, deps loop.Deps, cfg RetentionConfig) *Retention {
	return newRetention("wallet", deps, cfg, func(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
		return st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: cutoff, Max: batch})
	}, st.WalletPolicyRefusalsDeleteOld)
}

// newRetention is a retention whose every rule deletes what ended more than
// cfg.Age ago; with Age zero (or less) it has none and deletes nothing.
func newRetention(lane string, deps loop.Deps, cfg RetentionConfig, dels ...func(context.Context, time.Time, int) (int64, error)) *Retention {
	var rules []retentionRule
	if cfg.Age > 0 {
		for _, d := range dels {
			rules = append(rules, retentionRule{age: cfg.Age, delete: d})
		}
	}
	return newRetentionRules(lane, deps, cfg, rules)
}

func newRetentionRules(lane string, deps loop.Deps, cfg RetentionConfig, rules []retentionRule) *Retention {
	r := &Retention{cfg: cfg, lane: lane, rules: rules, deps: deps}
	r.Loop = loop.NewService(lane+"_retention", cfg.Interval, deps, cfg.BatchSize, r.RunOnce)
	return r
}

// RunOnce deletes, for each kind of row, up to BatchSize rows that ended
// more than its age ago, and returns how many it deleted in all. Each
// delete is its own statement with its own deadline. A retention with
// nothing to delete (Age zero) returns 0 at once, without touching the
// database.
func (r *Retention) RunOnce(ctx context.Context) (int, error) {
	now := r.deps.Clock.Now()
	var total int64
	for _, rule := range r.rules {
		dctx, cancel := context.WithTimeout(ctx, r.cfg.DBTimeout)
		n, err := rule.delete(dctx, now.Add(-rule.age), r.cfg.BatchSize)
		cancel()
		if err != nil {
			return 0, err
		}
		total += n
	}
	if total > 0 {
		r.deps.Metrics.Transition(r.lane, "deleted", int(total))
		r.deps.Logger.Debug("retention: deleted finished rows", "lane", r.lane, "count", total)
	}
	return int(total), nil
}
