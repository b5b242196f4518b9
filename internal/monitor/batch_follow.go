package monitor

import (
	"container/heap"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/store"
)

// followed is the set of pending batches a monitor follows in memory (the
// ones its own process's submitter saw accepted). Their next checks are kept
// in a min-heap, so a round takes the due ones without looking at the rest.
type followed struct {
	mu    sync.Mutex
	max   int
	items map[int64]tracked // by seq
	queue dueQueue          // entries whose due no longer matches items[seq] are stale
}

// tracked is a pending batch followed in memory.
type tracked struct {
	id        string
	serviceID string
	attempt   int
	due       time.Time // next check, in memory
	stored    time.Time // next check time in the database
	taken     bool      // handed to a round and not yet released
	verified  bool      // its unverified flag is to be cleared (store.CheckBatch.Verified)
}

type dueEntry struct {
	due time.Time
	seq int64
}

type dueQueue []dueEntry

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q dueQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dueQueue) Push(x any)        { *q = append(*q, x.(dueEntry)) }
func (q *dueQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func newFollowed(max int) *followed {
	return &followed{max: max, items: map[int64]tracked{}}
}

// add follows batches, first due at due, whose stored check time is stored,
// and returns how many, from the first, it took. Past max, batches are left
// to the database path.
func (f *followed) add(batches []store.CheckBatch, due, stored time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, b := range batches {
		if len(f.items) >= f.max {
			return i
		}
		f.items[b.Seq] = tracked{id: b.ID, serviceID: b.ServiceID, attempt: b.Attempt, due: due, stored: stored, verified: b.Verified}
		heap.Push(&f.queue, dueEntry{due: due, seq: b.Seq})
	}
	return len(batches)
}

// take hands out up to max followed batches due by now. Each stays followed
// and must be given back with release.
func (f *followed) take(now time.Time, max int) []store.CheckBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.CheckBatch
	for len(out) < max && f.queue.Len() > 0 && !f.queue[0].due.After(now) {
		e := heap.Pop(&f.queue).(dueEntry)
		t, ok := f.items[e.seq]
		if !ok || t.taken || !t.due.Equal(e.due) {
			continue // stale entry
		}
		t.taken = true
		f.items[e.seq] = t
		out = append(out, store.CheckBatch{Seq: e.seq, ID: t.id, ServiceID: t.serviceID, Attempt: t.attempt, Verified: t.verified})
	}
	return out
}

// again sets the next in-memory check of a taken batch that is still
// pending. It reports false when the stored check time comes too near and
// must be written forward (recordPending).
func (f *followed) again(seq int64, due time.Time, interval time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.items[seq]
	t.due = due
	f.items[seq] = t
	return t.stored.After(due.Add(interval))
}

// settle applies recorded outcomes: final ones stop being followed, pending
// ones keep being followed with the stored check time just written (and
// their unverified flag, cleared by that record, is not written again).
func (f *followed) settle(outcomes []store.StatusOutcome, stored time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range outcomes {
		t, ok := f.items[o.Seq]
		if !ok {
			continue
		}
		if o.Status == store.BatchStatusPending {
			t.stored, t.verified = stored, false
			f.items[o.Seq] = t
			continue
		}
		delete(f.items, o.Seq)
	}
}

// release gives back the batches a round took. Those still followed go back
// on the heap at their next check, or at retry when the round did not set
// one (the ledger failed, or answered something unexpected).
func (f *followed) release(batches []store.CheckBatch, now, retry time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range batches {
		t, ok := f.items[b.Seq]
		if !ok {
			continue
		}
		if !t.due.After(now) {
			t.due = retry
		}
		t.taken = false
		f.items[b.Seq] = t
		heap.Push(&f.queue, dueEntry{due: t.due, seq: b.Seq})
	}
}

// drain stops following every batch and returns each as a pending outcome.
func (f *followed) drain() []store.StatusOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.StatusOutcome, 0, len(f.items))
	for seq, t := range f.items {
		out = append(out, store.StatusOutcome{Seq: seq, ServiceID: t.serviceID, Attempt: t.attempt, Status: store.BatchStatusPending, Verified: t.verified})
	}
	f.items = map[int64]tracked{}
	f.queue = nil
	return out
}
