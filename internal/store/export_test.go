package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Test hooks into pool_group.go for the tests of package store_test.

// PoolAddGroup runs the intakes of params as one group, as concurrent
// PoolAdd calls are gathered, and returns each one's answer; alone says the
// group left it to run alone (it is not run here).
func (s *Store) PoolAddGroup(ctx context.Context, params []PoolAddParams) (res []PoolAddResult, errs []error, alone []bool) {
	group := make([]*poolIntake, len(params))
	for i, p := range params {
		p.Tx = p.Tx.lowered()
		group[i] = &poolIntake{ctx: ctx, p: p, wake: make(chan struct{}, 1)}
	}
	s.poolAddGroup(group)
	for _, in := range group {
		res, errs, alone = append(res, in.res), append(errs, in.err), append(alone, in.alone)
	}
	return res, errs, alone
}

// HoldPoolGroups takes every place among the groups running, for as long
// as the test needs (no stall gives them back), so that PoolAdd calls wait;
// release lets them go, gathered.
func (s *Store) HoldPoolGroups() (release func()) {
	g := s.poolGroups
	runs := make([]*poolRun, poolGroupsInFlight)
	g.mu.Lock()
	for i := range runs {
		runs[i] = &poolRun{g: g}
		g.running++
	}
	g.mu.Unlock()
	return func() {
		for _, r := range runs {
			r.giveBack()
		}
	}
}

// PoolIntakesWaiting is how many PoolAdd calls wait for a group.
func (s *Store) PoolIntakesWaiting() int {
	s.poolGroups.mu.Lock()
	defer s.poolGroups.mu.Unlock()
	return len(s.poolGroups.waiting)
}

// SendClaim sends sql as a claim's only statement, as the batch lane's
// claims are sent (sendClaim).
func (s *Store) SendClaim(ctx context.Context, sql string) error {
	return s.sendClaim(ctx, func(b *pgx.Batch) { b.Queue(sql) })
}

// WithCommitAnswersLost is s with its first n commits answered as lost:
// each commits, then reports the failure a connection cut before the
// server's answer arrived gives (a timeout), as a commit whose request's
// deadline passed meanwhile does.
func (s *Store) WithCommitAnswersLost(n int32) *Store {
	lost := &losingCommits{DB: s.db}
	lost.left.Store(n)
	return &Store{db: lost, pool: s.pool, q: s.q, poolGroups: &poolGroups{}}
}

type losingCommits struct {
	DB
	left atomic.Int32
}

func (l *losingCommits) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &losingCommitTx{Tx: tx, l: l}, nil
}

type losingCommitTx struct {
	pgx.Tx
	l *losingCommits
}

func (t *losingCommitTx) Commit(ctx context.Context) error {
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	if t.l.left.Add(-1) >= 0 {
		return fmt.Errorf("timeout: %w", context.DeadlineExceeded)
	}
	return nil
}
