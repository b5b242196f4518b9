package store

import (
	"context"

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
