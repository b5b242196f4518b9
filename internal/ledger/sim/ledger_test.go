package sim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type bundle struct {
	l     *sim.Ledger
	clock *clock.Fake
	// batches are built by one signer with a fixed key and nonce prefix, so
	// they are the same in every test run.
	signer *sawtooth.Signer
	n      int
}

// setup returns a simulated ledger on a fake clock. cfg.Clock is replaced.
func setup(t *testing.T, cfg sim.Config) *bundle {
	t.Helper()
	clk := clock.NewFake(t0)
	cfg.Clock = clk
	key := make([]byte, 32)
	key[0], key[31] = 0x5a, 1
	return &bundle{
		l:      sim.New(cfg),
		clock:  clk,
		signer: sawtooth.NewSigner(secp256k1.PrivKeyFromBytes(key), sawtooth.WithNoncePrefix("sim-")),
	}
}

// batches builds n new signed batches.
func (b *bundle) batches(t *testing.T, n int) []ledger.Batch {
	t.Helper()
	out := make([]ledger.Batch, n)
	for i := range out {
		b.n++
		id, p, err := b.signer.NewBatch(fmt.Appendf(nil, "payload %d", b.n))
		require.NoError(t, err)
		out[i] = ledger.Batch{ID: id, Payload: p}
	}
	return out
}

func (b *bundle) submit(t *testing.T, batches ...ledger.Batch) []error {
	t.Helper()
	errs, err := b.l.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.Len(t, errs, len(batches))
	return errs
}

func (b *bundle) status(t *testing.T, id string) ledger.BatchStatusResult {
	t.Helper()
	got, err := b.l.BatchStatuses(context.Background(), []string{id})
	require.NoError(t, err)
	return got[id]
}

func kinds(events []sim.Event) []sim.EventKind {
	out := make([]sim.EventKind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func TestLedger_SameSeedAndCallsGiveTheSameRun(t *testing.T) {
	t.Parallel()
	cfg := sim.Config{
		Seed: 42, CommitDelay: 3 * time.Second,
		RejectRate: 0.3, TransientRate: 0.3, LostRate: 0.2, DropResponseRate: 0.2,
	}
	// Both ledgers get the same batches.
	src := setup(t, cfg)
	calls := make([][]ledger.Batch, 12)
	for i := range calls {
		calls[i] = src.batches(t, 3)
	}

	run := func(seed int64) ([]sim.Event, []string, sim.Stats) {
		cfg := cfg
		cfg.Seed = seed
		b := setup(t, cfg)
		var outcomes []string
		for _, batches := range calls {
			errs, err := b.l.SubmitBatches(context.Background(), batches)
			outcomes = append(outcomes, fmt.Sprint(ledger.ClassOf(err), err == nil, len(errs)))
			b.clock.Advance(time.Second)
		}
		b.clock.Advance(time.Minute)
		statuses, err := b.l.BatchStatuses(context.Background(), ids(slices.Concat(calls...)))
		require.NoError(t, err)
		for _, batches := range calls {
			for _, bt := range batches {
				outcomes = append(outcomes, string(statuses[bt.ID].Status))
			}
		}
		return b.l.Events(), outcomes, b.l.Stats()
	}

	ev1, out1, st1 := run(42)
	ev2, out2, st2 := run(42)
	require.Equal(t, ev1, ev2)
	require.Equal(t, out1, out2)
	require.Equal(t, st1, st2)
	// The rates are all in play in this run, so the check above compares
	// runs that exercised every kind of fault.
	require.NotZero(t, st1.TransientFailures)
	require.NotZero(t, st1.DroppedResponses)
	require.NotZero(t, st1.Invalid)
	require.NotZero(t, st1.Lost)
	require.NotZero(t, st1.Committed)

	ev3, _, _ := run(43)
	require.NotEqual(t, ev1, ev3, "the seed must matter")
}

func TestLedger_BatchIsPendingUntilTheCommitDelayThenCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: 10 * time.Second})
	batch := b.batches(t, 1)[0]
	require.Equal(t, []error{nil}, b.submit(t, batch))

	require.Equal(t, ledger.BatchPending, b.status(t, batch.ID).Status)
	b.clock.Advance(10*time.Second - time.Microsecond)
	require.Equal(t, ledger.BatchPending, b.status(t, batch.ID).Status)
	b.clock.Advance(time.Microsecond)
	require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchCommitted}, b.status(t, batch.ID))

	ev := b.l.Events()
	require.Equal(t, []sim.EventKind{sim.EventAccepted, sim.EventCommitted}, kinds(ev))
	require.Equal(t, t0, ev[0].Time)
	require.Equal(t, t0.Add(10*time.Second), ev[1].Time)
	st := b.l.Stats()
	require.Equal(t, uint64(1), st.Accepted)
	require.Equal(t, uint64(1), st.Committed)
	require.Equal(t, uint64(0), st.Pending)
}

func TestLedger_RejectRateOneMakesEveryBatchInvalidWithAReason(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RejectRate: 1, CommitDelay: time.Second})
	batches := b.batches(t, 3)
	require.Equal(t, make([]error, 3), b.submit(t, batches...))
	require.Equal(t, ledger.BatchPending, b.status(t, batches[0].ID).Status)

	b.clock.Advance(time.Second)
	for _, bt := range batches {
		require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchInvalid, Reason: sim.InvalidReason}, b.status(t, bt.ID))
	}
	require.Equal(t, uint64(3), b.l.Stats().Invalid)
	require.Equal(t, uint64(0), b.l.Stats().Committed)
}

func TestLedger_TransientRateOneFailsEveryCallAndTakesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TransientRate: 1})
	batches := b.batches(t, 2)
	for range 5 {
		errs, err := b.l.SubmitBatches(context.Background(), batches)
		require.Nil(t, errs)
		require.Equal(t, ledger.Transient, ledger.ClassOf(err))
	}
	require.Equal(t, ledger.BatchUnknown, b.status(t, batches[0].ID).Status)
	require.Empty(t, b.l.Events())
	st := b.l.Stats()
	require.Equal(t, uint64(5), st.SubmitCalls)
	require.Equal(t, uint64(5), st.TransientFailures)
	require.Equal(t, uint64(0), st.Accepted)
}

func TestLedger_LostBatchAnswersUnknownAndIsTakenAgainWhenResubmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{LostRate: 1, CommitDelay: time.Second})
	batch := b.batches(t, 1)[0]
	b.submit(t, batch)
	require.Equal(t, ledger.BatchPending, b.status(t, batch.ID).Status)
	b.clock.Advance(time.Second)
	require.Equal(t, ledger.BatchUnknown, b.status(t, batch.ID).Status)

	// Submitting it again is a fresh acceptance, not a duplicate.
	require.Equal(t, []error{nil}, b.submit(t, batch))
	require.Equal(t, ledger.BatchPending, b.status(t, batch.ID).Status)
	require.Equal(t, []sim.EventKind{sim.EventAccepted, sim.EventLost, sim.EventAccepted}, kinds(b.l.Events()))
	st := b.l.Stats()
	require.Equal(t, uint64(2), st.Accepted)
	require.Equal(t, uint64(0), st.Duplicates)
	require.Equal(t, uint64(1), st.Lost)
}

func TestLedger_ResubmittingAHeldBatchIsADuplicateAndChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: 5 * time.Second})
	batch := b.batches(t, 1)[0]
	b.submit(t, batch)
	b.clock.Advance(2 * time.Second)
	require.Equal(t, []error{nil}, b.submit(t, batch), "while pending")

	// The duplicate did not restart the commit delay.
	b.clock.Advance(3 * time.Second)
	require.Equal(t, ledger.BatchCommitted, b.status(t, batch.ID).Status)
	require.Equal(t, []error{nil, nil}, b.submit(t, batch, batch), "after commit, twice in one call")
	require.Equal(t, ledger.BatchCommitted, b.status(t, batch.ID).Status)

	require.Equal(t, []sim.EventKind{
		sim.EventAccepted, sim.EventDuplicate, sim.EventCommitted, sim.EventDuplicate, sim.EventDuplicate,
	}, kinds(b.l.Events()))
	st := b.l.Stats()
	require.Equal(t, uint64(1), st.Accepted)
	require.Equal(t, uint64(3), st.Duplicates)
	require.Equal(t, uint64(1), st.Committed)
}

func TestLedger_DroppedResponseTakesTheBatchesButAnswersIndeterminate(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{DropResponseRate: 1})
	batches := b.batches(t, 2)
	errs, err := b.l.SubmitBatches(context.Background(), batches)
	require.Equal(t, ledger.Indeterminate, ledger.ClassOf(err))
	require.Error(t, err)
	require.Nil(t, errs)
	require.Equal(t, ledger.BatchCommitted, b.status(t, batches[0].ID).Status)
	require.Equal(t, uint64(2), b.l.Stats().Accepted)
	require.Equal(t, uint64(1), b.l.Stats().DroppedResponses)
}

func TestLedger_RefusesBatchesThatDoNotParseOrVerifyAndTakesTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	batches := b.batches(t, 4)
	batches[0].Payload = []byte("garbage")
	// A valid batch under another batch's id.
	batches[1].ID = batches[3].ID
	// A flipped byte inside the signed header: the signature no longer
	// verifies.
	tampered := slices.Clone(batches[2].Payload)
	tampered[10] ^= 0x01
	batches[2].Payload = tampered

	errs := b.submit(t, batches...)
	for i := range 3 {
		require.Equal(t, ledger.Deterministic, ledger.ClassOf(errs[i]), "batch %d: %v", i, errs[i])
	}
	require.ErrorIs(t, errs[0], sawtooth.ErrMalformedBatch)
	require.ErrorIs(t, errs[1], sawtooth.ErrInvalidBatch)
	require.NoError(t, errs[3])
	require.Equal(t, []sim.EventKind{sim.EventRefused, sim.EventRefused, sim.EventRefused, sim.EventAccepted, sim.EventCommitted},
		kinds(b.l.Events()))
	require.Equal(t, uint64(3), b.l.Stats().Refused)
}

func TestLedger_EventsAreInTimeOrderWithConsecutiveSeqs(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: 10 * time.Second})
	first := b.batches(t, 2)
	b.submit(t, first...)
	b.clock.Advance(4 * time.Second)
	second := b.batches(t, 1)
	b.submit(t, second...)
	// Both commit times pass before anyone looks: the log must still list
	// the first two commits before the third, each at its own time.
	b.clock.Advance(time.Hour)
	ev := b.l.Events()
	require.Len(t, ev, 6)
	for i, e := range ev {
		require.Equal(t, uint64(i+1), e.Seq)
		if i > 0 {
			require.False(t, e.Time.Before(ev[i-1].Time), "event %d is before event %d", i, i-1)
		}
	}
	require.Equal(t, sim.EventCommitted, ev[3].Kind)
	require.Equal(t, t0.Add(10*time.Second), ev[3].Time)
	require.Equal(t, second[0].ID, ev[5].BatchID)
	require.Equal(t, t0.Add(14*time.Second), ev[5].Time)
}

func TestLedger_CommitsDueAtTheSameTimeAreLoggedInIDOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: time.Second})
	batches := b.batches(t, 5)
	b.submit(t, batches...)
	b.clock.Advance(time.Second)
	var committed []string
	for _, e := range b.l.Events() {
		if e.Kind == sim.EventCommitted {
			committed = append(committed, e.BatchID)
		}
	}
	require.Len(t, committed, 5)
	require.True(t, slices.IsSorted(committed))
}

func TestLedger_AdvanceMakesDueTransitionsWithoutACall(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: time.Second})
	b.submit(t, b.batches(t, 1)...)
	b.clock.Advance(time.Second)
	b.l.Advance()
	// Every read advances too, so turn the clock back first: only the
	// explicit Advance can have made the commit.
	b.clock.Set(t0)
	require.Equal(t, uint64(1), b.l.Stats().Committed)
}

func TestLedger_EventsSinceReturnsOnlyNewerEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: time.Hour})
	b.submit(t, b.batches(t, 3)...)
	require.Len(t, b.l.EventsSince(0), 3)
	got := b.l.EventsSince(2)
	require.Len(t, got, 1)
	require.Equal(t, uint64(3), got[0].Seq)
	require.Empty(t, b.l.EventsSince(3))
	require.Empty(t, b.l.EventsSince(99))
}

func TestLedger_MaxEventsKeepsTheNewestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: time.Hour, MaxEvents: 4})
	for range 10 {
		b.submit(t, b.batches(t, 1)...)
	}
	ev := b.l.Events()
	require.LessOrEqual(t, len(ev), 8)
	require.GreaterOrEqual(t, len(ev), 4)
	require.Equal(t, uint64(10), ev[len(ev)-1].Seq)
	got := b.l.EventsSince(8)
	require.Equal(t, []uint64{9, 10}, []uint64{got[0].Seq, got[1].Seq})
}

func TestLedger_LatencyWaitHonoursTheContext(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Latency: time.Hour})
	batches := b.batches(t, 1)

	// A context that ends while the call waits: the call must end with it,
	// not an hour later.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.l.SubmitBatches(ctx, batches)
		done <- err
	}()
	select {
	case err := <-done:
		require.Equal(t, ledger.Transient, ledger.ClassOf(err))
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the latency wait ignored the context")
	}

	// A context already done does not wait at all.
	_, err := b.l.BatchStatuses(ctx, []string{"x"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, uint64(0), b.l.Stats().SubmitCalls, "the ledger never acted")
}

func TestLedger_BatchStatusesAnswersEveryIDAskedFor(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	batch := b.batches(t, 1)[0]
	b.submit(t, batch)
	got, err := b.l.BatchStatuses(context.Background(), []string{batch.ID, "never-seen", batch.ID})
	require.NoError(t, err)
	require.Equal(t, map[string]ledger.BatchStatusResult{
		batch.ID:     {Status: ledger.BatchCommitted},
		"never-seen": {Status: ledger.BatchUnknown},
	}, got)
}

func ids(batches []ledger.Batch) []string {
	out := make([]string, len(batches))
	for i, b := range batches {
		out[i] = b.ID
	}
	return out
}

func TestLedger_IsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{CommitDelay: time.Second, RejectRate: 0.2, LostRate: 0.1, TransientRate: 0.1, MaxEvents: 50})
	const workers, perWorker = 4, 10
	work := make([][]ledger.Batch, workers)
	for i := range work {
		work[i] = b.batches(t, perWorker)
	}
	var wg sync.WaitGroup
	for _, batches := range work {
		wg.Go(func() {
			for _, bt := range batches {
				_, _ = b.l.SubmitBatches(context.Background(), []ledger.Batch{bt, bt})
				_, _ = b.l.BatchStatuses(context.Background(), []string{bt.ID})
				b.clock.Advance(100 * time.Millisecond)
				_ = b.l.EventsSince(3)
			}
		})
	}
	wg.Wait()
	b.clock.Advance(time.Minute)
	st := b.l.Stats()
	require.Equal(t, uint64(workers*perWorker), st.SubmitCalls)
	require.Equal(t, uint64(0), st.Pending)
	require.Equal(t, st.Accepted, st.Committed+st.Invalid+st.Lost)
	require.Equal(t, 2*(st.SubmitCalls-st.TransientFailures), st.Accepted+st.Duplicates)
	ev := b.l.Events()
	require.True(t, slices.IsSortedFunc(ev, func(a, b sim.Event) int { return a.Time.Compare(b.Time) }),
		"the log is in time order even with calls racing the clock")
}

func TestLedger_SkipVerifyParsesButDoesNotVerifySignatures(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{false, true} {
		b := setup(t, sim.Config{SkipVerify: skip})
		batches := b.batches(t, 2)
		// A flipped byte inside the signed header: it still parses, but the
		// signature no longer verifies.
		tampered := slices.Clone(batches[0].Payload)
		tampered[10] ^= 0x01
		batches[0].Payload = tampered
		batches[1].Payload = []byte("garbage")

		errs := b.submit(t, batches...)
		require.ErrorIs(t, errs[1], sawtooth.ErrMalformedBatch, "skip %v: what does not parse is refused either way", skip)
		if skip {
			require.NoError(t, errs[0], "without verification a bad signature goes unnoticed")
		} else {
			require.ErrorIs(t, errs[0], sawtooth.ErrInvalidBatch)
		}
	}
}
