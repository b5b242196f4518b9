package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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

// poolIntake is one PoolAdd call waiting for, or in, a group.
type poolIntake = member[PoolAddParams, PoolAddResult]

// poolGroups gathers a process's pool intakes into groups: an intake joins
// a group of its chain with the same limits, one intake per sender.
type poolGroups = groups[PoolAddParams, PoolAddResult]

func newPoolGroups(s *Store) *poolGroups {
	return &poolGroups{
		max: poolGroupMax, inFlight: poolGroupsInFlight, stall: poolGroupStall,
		fits: func(group []*poolIntake, in *poolIntake) bool {
			first := group[0]
			return in.p.Tx.ChainID == first.p.Tx.ChainID && in.p.Limits == first.p.Limits &&
				!slices.ContainsFunc(group, func(m *poolIntake) bool { return m.p.Tx.Sender == in.p.Tx.Sender })
		},
		alone:    s.poolAddAlone,
		together: s.poolAddGroup,
		describe: func(p PoolAddParams) string { return "storing pool transaction " + p.Tx.Hash },
	}
}

// poolAddGroup stores a group's intakes in one transaction, in rounds: a
// round that leaves intakes out runs again without them.
func (s *Store) poolAddGroup(group []*poolIntake) {
	ctx, cancel := groupContext(group)
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
				in.alone = true
			}
			return
		}
	}
	for _, in := range todo {
		in.alone = true
	}
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
	dbsqlc.QueueLockTimeoutForTx(b, poolGroupLockTimeout)
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
		dbsqlc.QueuePoolSlotTakeMany(b, dbsqlc.PoolSlotTakeManyParams{
			ChainID: chainID, Pending: int64(grow.pending), Queued: int64(grow.queued),
			Start: rand.N(int32(poolAdmissionSlots)), N: int32(need),
		}, &slots)
		dbsqlc.QueuePoolAdmissionBound(b, chainID, &bound, &counted)
	}
	if grow.pending > 0 {
		dbsqlc.QueueNotify(b, dbsqlc.NotifyParams{Channel: notify.BundleQueuer})
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
