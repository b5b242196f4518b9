package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Grouped calls. Concurrent calls of one kind that wait while others run
// are taken together into one database round (one transaction, one
// statement for all their rows): under load, the round trips, statements
// and commits are most of what a call costs the server and the process. A
// call that finds nothing running runs at once, alone, so a lone call waits
// for nothing; the calls that arrive meanwhile gather into the next group.
// Each call is answered only after its group's round ended, so an answer
// still means what the call alone would have meant. The pool's intake
// (pool_group.go) and the wallet lane's task intake (wallet_task_group.go)
// are gathered this way.

// groups gathers a process's calls of one kind into groups.
type groups[P, R any] struct {
	// max is the most calls one group holds; inFlight the most groups (a
	// lone call is a group of one) running at once; a group that has run
	// stall gives its place to the next one, so that one waiting for a
	// lock held elsewhere does not stop the process's other calls.
	max, inFlight int
	stall         time.Duration
	// fits reports whether m may join group (it holds group[0] and up to
	// max-1 others).
	fits func(group []*member[P, R], m *member[P, R]) bool
	// alone runs one call by itself: a group of one, and every call a group
	// leaves to run alone.
	alone func(ctx context.Context, p P) (R, error)
	// together runs a group of two or more: it sets every member's res and
	// err, or alone for those that run alone afterwards.
	together func(group []*member[P, R])
	// describe names a call in the error of one whose context ended while
	// it waited for a group.
	describe func(p P) string

	mu      sync.Mutex
	waiting []*member[P, R]
	running int
}

// member is one call waiting for, or in, a group.
type member[P, R any] struct {
	ctx context.Context
	p   P
	// wake is signalled once: the member's group finished, or the member
	// leads (runs) the group in lead.
	wake chan struct{}
	lead []*member[P, R]
	run  *groupRun[P, R] // lead's place among the groups running
	// The outcome: res and err, or alone (the caller runs it alone).
	res   R
	err   error
	alone bool
}

func newMember[P, R any](ctx context.Context, p P) *member[P, R] {
	return &member[P, R]{ctx: ctx, p: p, wake: make(chan struct{}, 1)}
}

// add runs p in a group, or alone when nothing else runs.
func (g *groups[P, R]) add(ctx context.Context, p P) (R, error) {
	m := newMember[P, R](ctx, p)
	if !g.join(m) {
		select {
		case <-m.wake:
		case <-ctx.Done():
			if g.leave(m) {
				var none R
				return none, fmt.Errorf("%s: %w", g.describe(p), ctx.Err())
			}
			<-m.wake // taken into a group: it answers, or this call leads it
		}
	}
	if m.lead != nil {
		g.runGroup(m.lead, m.run)
	}
	if m.alone {
		return g.alone(ctx, p)
	}
	return m.res, m.err
}

// join queues m and, when fewer than inFlight groups run, starts the next
// group: true when m leads it, else it is handed to its leader.
func (g *groups[P, R]) join(m *member[P, R]) bool {
	g.mu.Lock()
	g.waiting = append(g.waiting, m)
	if g.running >= g.inFlight {
		g.mu.Unlock()
		return false
	}
	g.running++
	leader := g.startLocked()
	g.mu.Unlock()
	if leader == m {
		return true
	}
	leader.wake <- struct{}{}
	return false
}

// groupRun is a group's place among the inFlight running. It is given back
// when the group ends, or before, when the group has run stall: then the
// next group starts beside it.
type groupRun[P, R any] struct {
	g     *groups[P, R]
	timer *time.Timer
	given bool // under g.mu
}

// startLocked takes the next group off the queue with a place of its own
// and returns its leader, which the caller wakes unless it is the caller's.
func (g *groups[P, R]) startLocked() *member[P, R] {
	group := g.takeLocked()
	run := &groupRun[P, R]{g: g}
	run.timer = time.AfterFunc(g.stall, run.giveBack)
	group[0].lead, group[0].run = group, run
	return group[0]
}

// giveBack gives the run's place, once, to the next group, or counts one
// group fewer.
func (r *groupRun[P, R]) giveBack() {
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

// leave takes m out of the queue; false when a group has taken it.
func (g *groups[P, R]) leave(m *member[P, R]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.waiting, m)
	if i < 0 {
		return false
	}
	g.waiting = slices.Delete(g.waiting, i, i+1)
	return true
}

// takeLocked takes the next group off the queue: its oldest call and the
// next ones that fit with it, up to max. The group's first call leads it.
func (g *groups[P, R]) takeLocked() []*member[P, R] {
	group := []*member[P, R]{g.waiting[0]}
	rest := g.waiting[:0]
	for _, m := range g.waiting[1:] {
		if len(group) < g.max && g.fits(group, m) {
			group = append(group, m)
			continue
		}
		rest = append(rest, m)
	}
	clear(g.waiting[len(rest):])
	g.waiting = rest
	return group
}

// runGroup runs a group its caller leads (group[0] is the caller's own
// call), gives its place to the next group, and wakes its other members.
func (g *groups[P, R]) runGroup(group []*member[P, R], run *groupRun[P, R]) {
	ran := false
	defer func() {
		if !ran {
			// A panic: the others run alone rather than wait forever.
			for _, m := range group {
				m.alone = true
			}
		}
		run.timer.Stop()
		run.giveBack()
		for _, m := range group[1:] {
			m.wake <- struct{}{}
		}
	}()
	if len(group) == 1 {
		// Alone, as the leader's own call, still counted as a group
		// running: calls that arrive meanwhile gather into the next.
		m := group[0]
		m.res, m.err = g.alone(m.ctx, m.p)
	} else {
		g.together(group)
	}
	ran = true
}

// groupContext is the context a group's round runs in: not cancelled with
// any one caller's (the others wait for its answer), with the latest of
// their deadlines, if they all have one.
func groupContext[P, R any](group []*member[P, R]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(group[0].ctx)
	var last time.Time
	for _, m := range group {
		d, ok := m.ctx.Deadline()
		if !ok {
			return context.WithCancel(ctx)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}
