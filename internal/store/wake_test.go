package store_test

// The outcome transactions wake other processes' loops (NOTIFY) when, and
// only when, they made work for them.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

const wakeProbe = "ledgerq_test_wake_probe"

// listen returns a connection listening on channels and the probe channel.
func listen(t *testing.T, url string, channels ...string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, ch := range append(channels, wakeProbe) {
		_, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{ch}.Sanitize())
		require.NoError(t, err)
	}
	return conn
}

// woken returns the channels notified before the probe, which it sends: a
// connection's notifications arrive in the order they were committed.
func woken(t *testing.T, db *testdb.DB, conn *pgx.Conn) []string {
	t.Helper()
	require.NoError(t, db.Store.Notify(t.Context(), wakeProbe))
	var got []string
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		require.NoError(t, err)
		if n.Channel == wakeProbe {
			return got
		}
		got = append(got, n.Channel)
	}
}

func TestBatchRecordStatuses_WakesTheSubmittersOnlyWhenItQueuedABatch(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	conn := listen(t, db.URL, notify.BatchSubmitter)
	rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "a2", ServiceID: "a"},
		testfactory.Batch{ID: "b1", ServiceID: "b", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "c1", ServiceID: "c", Submitted: true, Status: store.BatchStatusPending},
	)
	record := func(id string, status store.BatchStatus) store.BatchRecorded {
		b := rows.Get(id)
		rec, err := db.Store.BatchRecordStatuses(t.Context(), store.BatchRecordStatusesParams{
			Now: clk.Now(), NextCheckAt: clk.Now().Add(time.Second),
			Outcomes: []store.StatusOutcome{{Seq: b.Seq, ServiceID: b.ServiceID, Attempt: b.Attempts, Status: status}},
		})
		require.NoError(t, err)
		return rec
	}

	// b had no other batch: its service is freed, nothing is queued.
	require.Equal(t, 0, record("b1", store.BatchStatusCommitted).Queued)
	require.Empty(t, woken(t, db, conn), "nothing was queued")
	// Still pending: nothing changes.
	require.Equal(t, 0, record("c1", store.BatchStatusPending).Queued)
	require.Empty(t, woken(t, db, conn))
	// a's next batch is queued by the transaction that commits a1.
	clk.Advance(time.Second)
	rec := record("a1", store.BatchStatusCommitted)
	require.Equal(t, 1, rec.Queued)
	require.Equal(t, []string{"a2"}, rows.QueuedIDs())
	require.Equal(t, []string{notify.BatchSubmitter}, woken(t, db, conn))
	// An unknown batch is queued again at once.
	clk.Advance(time.Second)
	require.Equal(t, 1, record("c1", store.BatchStatusUnknown).Queued)
	require.Equal(t, []string{notify.BatchSubmitter}, woken(t, db, conn))
}

func TestBatchRecordStatuses_RefusesAnOutcomeWithoutItsService(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	testfactory.New(t, st, clk).PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Status: store.BatchStatusPending})
	b, err := st.BatchGet(t.Context(), "a1")
	require.NoError(t, err)
	_, err = st.BatchRecordStatuses(t.Context(), store.BatchRecordStatusesParams{
		Now: clk.Now(), NextCheckAt: clk.Now(),
		Outcomes: []store.StatusOutcome{{Seq: b.Seq, Attempt: b.Attempts, Status: store.BatchStatusCommitted}},
	})
	require.ErrorContains(t, err, "without its service")
	got, err := st.BatchGet(t.Context(), "a1")
	require.NoError(t, err)
	require.Equal(t, store.BatchStatusPending, got.Status, "nothing was recorded")
}

// An accepted batch that is recorded is one no monitor of the submitter's
// process follows (those stay held, unwritten): every monitor is woken for it.
func TestBatchRecordSubmit_WakesTheMonitorsForAcceptedBatches(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	conn := listen(t, db.URL, notify.BatchMonitor)
	rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Queued: true})
	claimed, err := db.Store.BatchClaimQueued(t.Context(), store.BatchClaimQueuedParams{Now: clk.Now(), LeaseUntil: clk.Now().Add(time.Minute), Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	rec, err := db.Store.BatchRecordSubmit(t.Context(), store.BatchRecordSubmitParams{
		Now: clk.Now(), NextCheckAt: clk.Now().Add(time.Second),
		Outcomes: []store.SubmitOutcome{{Seq: claimed[0].Seq, Attempt: claimed[0].Attempt, Result: store.SubmitAccepted}},
	})
	require.NoError(t, err)
	require.Equal(t, 1, rec.Applied)
	require.Equal(t, store.BatchStatusPending, rows.Get(claimed[0].ID).Status)
	require.Equal(t, []string{notify.BatchMonitor}, woken(t, db, conn))
}

// The monitor's outcome transaction reaches the server in one round trip; it
// is still one transaction: when the admission it ends with fails, the
// statuses it recorded before are not kept either.
func TestBatchRecordStatuses_IsOneTransactionEvenInOneRoundTrip(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "boom", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "a2", ServiceID: "boom"},
	)
	// Admission of service boom fails (as a statement that errors would).
	_, err := db.Store.DB().Exec(t.Context(), `
		CREATE FUNCTION ledgerq.test_refuse_admission() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'admission refused by the test'; END $$;
		CREATE TRIGGER test_refuse_admission BEFORE UPDATE ON ledgerq.batches FOR EACH ROW
		WHEN (OLD.queued_at IS NULL AND NEW.queued_at IS NOT NULL AND NEW.service_id = 'boom')
		EXECUTE FUNCTION ledgerq.test_refuse_admission();`)
	require.NoError(t, err)
	a1 := rows.Get("a1")
	_, err = db.Store.BatchRecordStatuses(t.Context(), store.BatchRecordStatusesParams{
		Now: clk.Now(), NextCheckAt: clk.Now().Add(time.Second),
		Outcomes: []store.StatusOutcome{{Seq: a1.Seq, ServiceID: a1.ServiceID, Attempt: a1.Attempts, Status: store.BatchStatusCommitted}},
	})
	require.ErrorContains(t, err, "admission refused by the test")
	require.Equal(t, store.BatchStatusPending, rows.Get("a1").Status, "the status recorded before the failed admission is rolled back")
	require.Empty(t, rows.QueuedIDs())
}

// The builder lane's transactions wake the role they made work for: a
// pending transaction the queuer (it may cut a bundle), a queued bundle or a
// freed core the submitter, a sent version the monitor; and nothing else.
func TestBuilderLane_WakesEachRoleOnlyWhenItMadeWorkForIt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	conn := listen(t, db.URL, notify.BundleQueuer, notify.BundleSubmitter, notify.BundleMonitor)
	f := newBundleFixture(t, db.Store)
	pool := newPoolFixture(t, db.Store)
	pool.now = f.clock.Now()

	pool.mustAdd(testfactory.PoolTx(1, 1, 2_000_000_000, 1_000_000_000))
	require.Empty(t, woken(t, db, conn), "a nonce gap: nothing to cut")
	pool.mustAdd(testfactory.PoolTx(1, 0, 2_000_000_000, 1_000_000_000))
	require.Equal(t, []string{notify.BundleQueuer}, woken(t, db, conn), "pending, and its successor promoted")
	pool.mustAdd(testfactory.PoolTx(1, 2, 2_000_000_000, 1_000_000_000))
	require.Equal(t, []string{notify.BundleQueuer}, woken(t, db, conn))

	require.Len(t, f.cut(1, 10, 3), 3) // 42, 43, 44
	require.Equal(t, []string{notify.BundleSubmitter}, woken(t, db, conn))
	require.Empty(t, f.cut(1, 10, 3))
	require.Empty(t, woken(t, db, conn), "nothing cut")

	c42 := f.mustClaim(42)
	require.Empty(t, woken(t, db, conn), "a claim makes no work for another role")
	f.result(c42, nil)
	require.Equal(t, []string{notify.BundleMonitor}, woken(t, db, conn), "sent: the monitor follows it")
	c43 := f.mustClaim(43)
	f.result(c43, ledger.NewError(ledger.Transient, "busy", nil))
	require.Equal(t, []string{notify.BundleSubmitter}, woken(t, db, conn), "refused: queued again, its core free")

	f.block(nil, nil)
	require.Empty(t, woken(t, db, conn), "an empty block frees nothing")
	f.block([]ledger.Hash{c42.PackageHash()}, nil)
	require.Equal(t, []string{notify.BundleSubmitter}, woken(t, db, conn), "guaranteed: its core is free")

	f.clock.Advance(time.Hour)
	c := f.claim()
	require.NotNil(t, c)
	f.clock.Advance(bundleTimeout)
	woken(t, db, conn)
	require.Len(t, f.timeouts(3).Requeued, 1)
	require.Equal(t, []string{notify.BundleSubmitter}, woken(t, db, conn), "timed out: requeued, its core free")
	f.mustClaim(c.Bundle.Number)
	f.clock.Advance(bundleTimeout)
	for f.head < c.Package.Anchor.Number+ledger.RecentHistorySize {
		f.block(nil, nil)
	}
	woken(t, db, conn)
	require.NotEmpty(t, f.timeouts(2).Dropped)
	require.ElementsMatch(t, []string{notify.BundleSubmitter, notify.BundleQueuer}, woken(t, db, conn),
		"dropped: its transactions are pending again and its core is free")
}

// A task's transition that stores webhook deliveries wakes the deliverers;
// one that stores none (no endpoint subscribed) does not.
func TestWebhookEmit_WakesTheDeliverersOnlyWhenItStoredADelivery(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	conn := listen(t, db.URL, notify.WalletWebhooks)
	now := testfactory.Start()
	ev := store.WebhookEvent{Wallet: "alpha", Type: store.WebhookSubmitted, TaskID: "t1"}
	n, err := db.Store.WebhookEmit(t.Context(), now, ev)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, woken(t, db, conn), "no endpoint: nothing to deliver")
	testfactory.New(t, db.Store, testfactory.NewClock()).CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: "alpha"})
	n, err = db.Store.WebhookEmit(t.Context(), now, ev)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, []string{notify.WalletWebhooks}, woken(t, db, conn))
}

// With ClaimUntil, the transaction that ends a batch claims its service's
// next batch for the caller's submitter instead of queuing it: held under
// a lease, one attempt more, returned with its payload, and no submitter
// woken for it. A service with nothing more gets nothing; an unknown batch
// is still queued again.
func TestBatchRecordStatuses_ClaimsTheNextBatchOfAFreedServiceForTheCaller(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	conn := listen(t, db.URL, notify.BatchSubmitter)
	rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Status: store.BatchStatusPending, Attempts: 1},
		testfactory.Batch{ID: "a2", ServiceID: "a"},
		testfactory.Batch{ID: "a3", ServiceID: "a"},
		testfactory.Batch{ID: "b1", ServiceID: "b", Submitted: true, Status: store.BatchStatusPending, Attempts: 1},
		testfactory.Batch{ID: "c1", ServiceID: "c", Submitted: true, Status: store.BatchStatusPending, Attempts: 1},
	)
	var outcomes []store.StatusOutcome
	for id, st := range map[string]store.BatchStatus{"a1": store.BatchStatusCommitted, "b1": store.BatchStatusInvalid, "c1": store.BatchStatusUnknown} {
		b := rows.Get(id)
		outcomes = append(outcomes, store.StatusOutcome{Seq: b.Seq, ServiceID: b.ServiceID, Attempt: b.Attempts, Status: st})
	}
	lease := clk.Now().Add(time.Minute)
	rec, err := db.Store.BatchRecordStatuses(t.Context(), store.BatchRecordStatusesParams{
		Now: clk.Now(), NextCheckAt: clk.Now().Add(time.Second), Outcomes: outcomes, ClaimUntil: lease,
	})
	require.NoError(t, err)
	require.Equal(t, 3, rec.Applied)
	a2 := rows.Get("a2")
	require.Equal(t, []store.ClaimedBatch{{Seq: a2.Seq, ID: "a2", ServiceID: "a", Payload: []byte{0}, Attempt: 1}}, rec.Claimed)
	require.Equal(t, 1, rec.Queued, "c1 only, queued again")
	require.True(t, a2.Submitted)
	require.Equal(t, store.BatchStatusNone, a2.Status)
	require.Nil(t, a2.QueuedAt)
	require.Equal(t, lease, *a2.ClaimExpiresAt)
	require.Equal(t, clk.Now(), *a2.LastSubmittedAt)
	require.Equal(t, []string{"c1"}, rows.QueuedIDs())
	require.Equal(t, []string{notify.BatchSubmitter}, woken(t, db, conn), "for c1")
	require.False(t, rows.Get("a3").Submitted, "one batch of a service at a time")
}
