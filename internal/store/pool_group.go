package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// Grouped intake. The intakes of one process that wait while others run
// are taken together, several senders at once, into one database
// transaction: one BEGIN and COMMIT, one round trip for every sender's lock
// and reads, one for every row, next nonce, admission and wake-up. Under
// load that is most of what an intake costs the server and the process.
// Each intake is still decided by the same rules, under its sender's lock
// (a group takes its senders' locks in sender order, so groups never
// deadlock one another), and
// answered only after the group's commit, so an answer still means the
// transaction is stored.
//
// A group holds only intakes that simply add their transaction (the common
// case). An intake refused under its lock is answered with its refusal and
// left out, one that would replace, evict, drop or promote runs alone, and
// the group runs again without them: a group stores nothing for an intake
// it does not admit. Whenever a group cannot finish as one (its rows moved,
// the admission needs an exact count, a sender's lock was held elsewhere
// past poolGroupLockTimeout, the database failed), each of its intakes runs
// alone, as every intake did before grouping.

// poolGroupMax is the most intakes one group holds. Each transaction a
// group adds takes an admission slot: two groups of six leave four of the
// 16 to the intakes that run alone, here or in other processes.
const poolGroupMax = 6

// poolGroupsInFlight is the most groups (a lone intake is a group of one)
// one process runs at once; an intake that arrives while they run waits for
// the next group.
const poolGroupsInFlight = 2

// poolGroupStall is how long a group (or lone intake) may run before it
// gives up its place among the poolGroupsInFlight, so that one waiting for
// a lock held elsewhere does not stop the process's other intakes.
const poolGroupStall = 100 * time.Millisecond

// poolGroupLockTimeout is the longest a group waits for one of its senders'
// locks before it gives up and its intakes run alone (each then waits for
// its own sender only).
const poolGroupLockTimeout = "100ms"

// errPoolGroupSplit: the group's reads left some intakes out (answered, or
// to run alone); it runs again without them.
var errPoolGroupSplit = errors.New("pool intake group left intakes out")

// errPoolGroupAlone: the group cannot finish as one; each intake runs alone.
var errPoolGroupAlone = errors.New("pool intake group runs its intakes alone")

// poolGroups gathers a process's intakes into groups.
type poolGroups struct {
	mu      sync.Mutex
	waiting []*poolIntake
	running int
}

// poolIntake is one PoolAdd call waiting for, or in, a group.
type poolIntake struct {
	ctx context.Context
	p   PoolAddParams
	// wake is signalled once: the intake's group finished, or the intake
	// leads (runs) the group in lead.
	wake chan struct{}
	lead []*poolIntake
	run  *poolRun // lead's place among the groups running
	// The outcome: res and err, or alone (the caller runs it alone).
	res   PoolAddResult
	err   error
	alone bool
}

// add runs p in a group, or alone when nothing else waits.
func (g *poolGroups) add(ctx context.Context, s *Store, p PoolAddParams) (PoolAddResult, error) {
	in := &poolIntake{ctx: ctx, p: p, wake: make(chan struct{}, 1)}
	if !g.join(in) {
		select {
		case <-in.wake:
		case <-ctx.Done():
			if g.leave(in) {
				return PoolAddResult{}, fmt.Errorf("storing pool transaction %s: %w", p.Tx.Hash, ctx.Err())
			}
			<-in.wake // taken into a group: it answers, or this call leads it
		}
	}
	if in.lead != nil {
		s.runPoolGroup(in.lead, in.run)
	}
	if in.alone {
		return s.poolAddAlone(ctx, p)
	}
	return in.res, in.err
}

// join queues in and, when fewer than poolGroupsInFlight groups run, starts
// the next group: true when in leads it, else it is handed to its leader.
func (g *poolGroups) join(in *poolIntake) bool {
	g.mu.Lock()
	g.waiting = append(g.waiting, in)
	if g.running >= poolGroupsInFlight {
		g.mu.Unlock()
		return false
	}
	g.running++
	leader := g.startLocked()
	g.mu.Unlock()
	if leader == in {
		return true
	}
	leader.wake <- struct{}{}
	return false
}

// poolRun is a group's place among the poolGroupsInFlight running. It is
// given back when the group ends, or before, when the group has run
// poolGroupStall: then the next group starts beside it.
type poolRun struct {
	g     *poolGroups
	timer *time.Timer
	given bool // under g.mu
}

// startLocked takes the next group off the queue with a place of its own
// and returns its leader, which the caller wakes unless it is the caller's.
func (g *poolGroups) startLocked() *poolIntake {
	group := g.takeLocked()
	run := &poolRun{g: g}
	run.timer = time.AfterFunc(poolGroupStall, run.giveBack)
	group[0].lead, group[0].run = group, run
	return group[0]
}

// giveBack gives the run's place, once, to the next group, or counts one
// group fewer.
func (r *poolRun) giveBack() {
	g := r.g
	g.mu.Lock()
	if r.given {
		g.mu.Unlock()
		return
	}
	r.given = true
	if len(g.waiting) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	leader := g.startLocked()
	g.mu.Unlock()
	leader.wake <- struct{}{}
}

// leave takes in out of the queue; false when a group has taken it.
func (g *poolGroups) leave(in *poolIntake) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.waiting, in)
	if i < 0 {
		return false
	}
	g.waiting = slices.Delete(g.waiting, i, i+1)
	return true
}

// takeLocked takes the next group off the queue: its oldest intake and the
// next ones of other senders of its chain with the same limits, up to
// poolGroupMax. The group's first intake leads it.
func (g *poolGroups) takeLocked() []*poolIntake {
	first := g.waiting[0]
	group := []*poolIntake{first}
	rest := g.waiting[:0]
	for _, in := range g.waiting[1:] {
		if len(group) < poolGroupMax && in.p.Tx.ChainID == first.p.Tx.ChainID && in.p.Limits == first.p.Limits &&
			!slices.ContainsFunc(group, func(m *poolIntake) bool { return m.p.Tx.Sender == in.p.Tx.Sender }) {
			group = append(group, in)
			continue
		}
		rest = append(rest, in)
	}
	clear(g.waiting[len(rest):])
	g.waiting = rest
	return group
}

// runPoolGroup runs a group its caller leads (group[0] is the caller's own
// intake), gives its place to the next group, and wakes its other intakes.
func (s *Store) runPoolGroup(group []*poolIntake, run *poolRun) {
	ran := false
	defer func() {
		if !ran {
			// A panic: the others run alone rather than wait forever.
			for _, in := range group {
				in.alone = true
			}
		}
		run.timer.Stop()
		run.giveBack()
		for _, in := range group[1:] {
			in.wake <- struct{}{}
		}
	}()
	if len(group) == 1 {
		// Alone, as the leader's own intake, still counted as a group
		// running: intakes that arrive meanwhile gather into the next.
		in := group[0]
		in.res, in.err = s.poolAddAlone(in.ctx, in.p)
	} else {
		s.poolAddGroup(group)
	}
	ran = true
}

// poolAddGroup stores a group's intakes in one transaction, in rounds: a
// round that leaves intakes out runs again without them.
func (s *Store) poolAddGroup(group []*poolIntake) {
	ctx, cancel := poolGroupContext(group)
	defer cancel()
	todo := slices.Clone(group)
	slices.SortFunc(todo, func(a, b *poolIntake) int {
		return cmp.Or(cmp.Compare(a.p.Tx.ChainID, b.p.Tx.ChainID), cmp.Compare(a.p.Tx.Sender, b.p.Tx.Sender))
	})
	for len(todo) > 1 {
		err := retryTx(ctx, func() error {
			return s.inTx(ctx, func(dbtx pgx.Tx) error { return s.poolGroupTx(ctx, dbtx, todo) })
		})
		switch {
		case err == nil:
			return
		case errors.Is(err, errPoolGroupSplit):
			todo = slices.DeleteFunc(todo, func(in *poolIntake) bool { return in.alone || in.err != nil })
		default:
			for _, in := range todo {
				// A commit whose answer was lost may have stored the
				// group: an intake found stored is answered so (run
				// alone, it would be "already known").
				if answerLost(err) {
					if stored, ok := s.poolStoredAfterAll(ctx, in.p.Tx.ChainID, in.p.Tx.Hash); ok {
						in.res = PoolAddResult{Tx: stored}
						continue
					}
				}
				in.alone = true
			}
			return
		}
	}
	for _, in := range todo {
		in.alone = true
	}
}

// poolGroupContext is the context a group's transaction runs in: not
// cancelled with any one caller's (the others wait for its answer), with
// the latest of their deadlines, if they all have one.
func poolGroupContext(group []*poolIntake) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(group[0].ctx)
	var last time.Time
	for _, in := range group {
		d, ok := in.ctx.Deadline()
		if !ok {
			return context.WithCancel(ctx)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}

// poolGroupTx is one round of a group (its intakes in sender order): every
// sender's lock and reads in one round trip, the plans, then every write,
// the admission of the whole growth and one wake-up in another.
func (s *Store) poolGroupTx(ctx context.Context, dbtx pgx.Tx, todo []*poolIntake) error {
	n := len(todo)
	var (
		reads   = make([]intakeReads, n)
		plans   = make([]poolPlan, n)
		left    bool
		b       = &pgx.Batch{}
		chainID = todo[0].p.Tx.ChainID
	)
	queueExec(b, (*dbsqlc.Queries).LockTimeoutForTx, poolGroupLockTimeout)
	for i, in := range todo {
		in.res, in.err, in.alone = PoolAddResult{}, nil, false
		reads[i].queue(b, in.p)
	}
	if err := dbtx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("locking %d pool senders and reading their transactions: %w", n, err)
	}
	for i, in := range todo {
		plan, err := reads[i].plan(in.p)
		switch {
		case err != nil:
			in.err, left = err, true
		case reads[i].found || !plan.addsOnly():
			in.alone, left = true, true
		}
		plans[i] = plan
	}
	if left {
		return errPoolGroupSplit
	}

	b = &pgx.Batch{}
	inserted := make([]int64, n)
	var grow poolGrowth
	for i, in := range todo {
		queueIntakeAdd(b, in.p, plans[i], &inserted[i])
		grow.pending += plans[i].growth.pending
		grow.queued += plans[i].growth.queued
	}
	var (
		slots   []int16
		bound   dbsqlc.PoolAdmissionBoundRow
		counted bool
	)
	need := max(grow.pending, grow.queued)
	if need > 0 {
		queueMany(b, (*dbsqlc.Queries).PoolSlotTakeMany, dbsqlc.PoolSlotTakeManyParams{
			ChainID: chainID, Pending: int64(grow.pending), Queued: int64(grow.queued),
			Start: rand.N(int32(poolAdmissionSlots)), N: int32(need),
		}, &slots)
		queueOne(b, (*dbsqlc.Queries).PoolAdmissionBound, chainID, &bound, &counted)
	}
	if grow.pending > 0 {
		queueExec(b, (*dbsqlc.Queries).Notify, dbsqlc.NotifyParams{Channel: notify.BundleQueuer})
	}
	if err := dbtx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("storing %d pool transactions: %w", n, err)
	}
	for i, in := range todo {
		if inserted[i] != 1 {
			in.alone, left = true, true // its row moved: alone, it reads again
		}
	}
	if left {
		return errPoolGroupSplit
	}
	if need > 0 {
		// The bound was read in a statement after the slots': under them.
		if len(slots) < need || !counted || admitOnBound(bound, todo[0].p.Limits, grow, len(slots)) != nil {
			return errPoolGroupAlone
		}
	}
	for i, in := range todo {
		in.res = poolAddResult(in.p, plans[i])
	}
	return nil
}
