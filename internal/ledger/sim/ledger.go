package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Config configures a simulated Ledger. Rates are fractions in [0, 1]; a
// value outside is clamped.
type Config struct {
	// Seed seeds every random choice.
	Seed int64 `flag:"seed" help:"simulated ledger: random seed"`
	// Clock tells the ledger's time; nil means clock.Real. Commit delays and
	// event times use it, so a test drives them with a clock.Fake.
	Clock clock.Clock
	// Logger receives the ledger's logs; nil discards them.
	Logger *slog.Logger
	// Latency is how long every call waits before the ledger acts, in real
	// time, honouring the caller's context. Tests leave it 0.
	Latency time.Duration `flag:"latency" help:"simulated ledger: latency of each call"`
	// CommitDelay is how long after acceptance a batch becomes final
	// (COMMITTED, INVALID, or forgotten when lost), by Clock. Until then it is
	// PENDING.
	CommitDelay time.Duration `flag:"commit-delay" help:"simulated ledger: time from acceptance to commit"`
	// RejectRate is the fraction of accepted batches that end INVALID instead
	// of COMMITTED.
	RejectRate float64 `flag:"reject-rate" help:"simulated ledger: fraction of accepted batches that end INVALID"`
	// TransientRate is the fraction of submit calls that fail as
	// ledger.Transient and accept nothing.
	TransientRate float64 `flag:"transient-rate" help:"simulated ledger: fraction of submit calls that fail transiently"`
	// LostRate is the fraction of accepted batches the ledger silently
	// forgets at their commit time: from then on their status is UNKNOWN, as
	// from a validator that dropped them. Submitting one again is accepted
	// afresh.
	LostRate float64 `flag:"lost-rate" help:"simulated ledger: fraction of accepted batches it loses (they answer UNKNOWN)"`
	// DropResponseRate is the fraction of submit calls that take effect on the
	// ledger but whose answer is lost: the caller gets a
	// ledger.Indeterminate error (over HTTP, the connection is cut).
	DropResponseRate float64 `flag:"drop-response-rate" help:"simulated ledger: fraction of submit calls that succeed but whose answer is lost"`
	// MaxEvents bounds the event log; the oldest events are dropped past it.
	// 0 keeps every event, which tests want and a long benchmark does not.
	MaxEvents int `flag:"max-events" help:"simulated ledger: keep at most this many events in its log (0: all)"`
	// SkipVerify makes the ledger parse each batch without verifying its
	// signatures: verification is the ledger's cost, paid on the ledger's
	// machines in production, and a benchmark of ledgerq can leave it out.
	SkipVerify bool `flag:"verify" value:"negated" help:"simulated ledger: verify each batch's signatures as a validator does (false: parse only; the ledger's cost, paid on its own machines in production)"`
}

// EventKind names what happened to a batch.
type EventKind string

// The kinds of event in the log.
const (
	// EventAccepted: the ledger took a batch it did not hold.
	EventAccepted EventKind = "accepted"
	// EventDuplicate: the ledger was sent a batch it already held; nothing
	// changed.
	EventDuplicate EventKind = "duplicate"
	// EventRefused: the ledger refused a batch at submission (it does not
	// parse or its signatures do not verify).
	EventRefused EventKind = "refused"
	// EventCommitted: a held batch was committed.
	EventCommitted EventKind = "committed"
	// EventInvalid: a held batch was found invalid.
	EventInvalid EventKind = "invalid"
	// EventLost: a held batch was forgotten.
	EventLost EventKind = "lost"
)

// Event is one entry of the ledger's log. Seq numbers are consecutive from 1.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    EventKind `json:"kind"`
	BatchID string    `json:"batch_id,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// Stats counts what the ledger has done.
type Stats struct {
	// SubmitCalls counts submit calls, including failed ones.
	SubmitCalls uint64 `json:"submit_calls"`
	// BatchesSubmitted counts batches across submit calls.
	BatchesSubmitted uint64 `json:"batches_submitted"`
	// Accepted counts batches taken that the ledger did not hold.
	Accepted uint64 `json:"accepted"`
	// Duplicates counts batches sent again while held.
	Duplicates uint64 `json:"duplicates"`
	// Refused counts batches refused at submission.
	Refused uint64 `json:"refused"`
	// TransientFailures counts submit calls failed as transient.
	TransientFailures uint64 `json:"transient_failures"`
	// DroppedResponses counts submit calls whose answer was dropped.
	DroppedResponses uint64 `json:"dropped_responses"`
	// Committed, Invalid and Lost count batches that reached that end.
	Committed uint64 `json:"committed"`
	Invalid   uint64 `json:"invalid"`
	Lost      uint64 `json:"lost"`
	// Pending is how many batches are held and not yet final.
	Pending uint64 `json:"pending"`
	// StatusCalls counts status queries.
	StatusCalls uint64 `json:"status_calls"`
}

// Ledger is the simulated ledger. It is safe for concurrent use.
type Ledger struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	rng    *rand.Rand
	events []Event
	seq    uint64
	stats  Stats
	batch  batchLane
}

// New returns a simulated ledger.
func New(cfg Config) *Ledger {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.RejectRate = ledger.ClampRate(cfg.RejectRate)
	cfg.TransientRate = ledger.ClampRate(cfg.TransientRate)
	cfg.LostRate = ledger.ClampRate(cfg.LostRate)
	cfg.DropResponseRate = ledger.ClampRate(cfg.DropResponseRate)
	return &Ledger{
		cfg:   cfg,
		clock: cfg.Clock,
		log:   cfg.Logger,
		// PCG wants two words; the second is a fixed odd constant so that
		// seeds 0 and 1 do not share a stream.
		rng:   rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15)),
		batch: newBatchLane(),
	}
}

// Advance makes every transition that is due by the clock (commits,
// invalidations, losses), in due-time order. Every call into the ledger does
// this first; tests call it after moving a fake clock to see the log settle.
func (l *Ledger) Advance() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clock.Now())
}

// Events returns the event log in order, after Advance.
func (l *Ledger) Events() []Event {
	return l.EventsSince(0)
}

// EventsSince returns the events with Seq greater than after, in order, after
// Advance. A poller passes the last Seq it has seen.
func (l *Ledger) EventsSince(after uint64) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clock.Now())
	start := 0
	if len(l.events) > 0 {
		first := l.events[0].Seq
		if after >= first {
			start = min(int(after-first+1), len(l.events))
		}
	}
	out := make([]Event, len(l.events)-start)
	copy(out, l.events[start:])
	return out
}

// Stats returns the counters, after Advance.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clock.Now())
	s := l.stats
	s.Pending = uint64(l.batch.due.Len())
	return s
}

// advanceLocked makes every transition due by now, in every lane.
func (l *Ledger) advanceLocked(now time.Time) {
	l.batch.advance(l, now)
}

// record appends an event. The caller holds mu.
func (l *Ledger) record(t time.Time, kind EventKind, batchID, reason string) {
	l.seq++
	l.events = append(l.events, Event{Seq: l.seq, Time: t, Kind: kind, BatchID: batchID, Reason: reason})
	if m := l.cfg.MaxEvents; m > 0 && len(l.events) >= 2*m {
		// Trim in one copy every m events rather than on every append.
		n := copy(l.events, l.events[len(l.events)-m:])
		clear(l.events[n:])
		l.events = l.events[:n]
	}
}

// chance draws from the seeded source. The caller holds mu. It always draws,
// whatever the rate, so that changing one rate does not shift the others'
// draws.
func (l *Ledger) chance(rate float64) bool {
	return l.rng.Float64() < rate
}

// wait is the call's simulated network and processing time.
func (l *Ledger) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulated ledger call: %w", err)
	}
	if l.cfg.Latency <= 0 {
		return nil
	}
	t := time.NewTimer(l.cfg.Latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("simulated ledger call: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
