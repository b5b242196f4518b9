package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// The send-result classes under faults: with 30% of sends refused before the
// chain saw them and 30% of answers lost after it took them (both
// indeterminate: treated as sent, never recycled, broadcast again with the
// same bytes), every task of several wallets ends done exactly once, no
// nonce carries two transactions and none is skipped.
func TestWallet_UnderTransientAndLostResponseFaultsEveryTaskIsDoneOnceWithNoNonceSkippedOrUsedTwice(t *testing.T) {
	t.Parallel()
	const wallets, perWallet = 4, 75
	e := setup(t, options{wallets: wallets, sim: evmsim.Config{Seed: 3, TransientRate: 0.3, LostResponseRate: 0.3},
		cfg: func(c *wallet.Config) { c.InFlight = 20 }})
	tasks := make([][]store.Task, wallets)
	var all []store.Task
	for i := range perWallet {
		for w := range wallets {
			task := e.post(t, w, int32(i%3), int64(1000+i), nil)
			tasks[w] = append(tasks[w], task)
			all = append(all, task)
		}
	}
	e.drive(t, e.pool, 200, all...)
	for w := range wallets {
		nonces := e.requireDoneOnce(t, tasks[w]...)
		e.requireContiguous(t, w, 0, nonces)
		e.requireOneTxPerNonce(t, w)
	}
	var indeterminate int
	for _, r := range e.led.Sends() {
		if r.Err != nil {
			indeterminate++
		}
	}
	require.Greater(t, indeterminate, wallets*perWallet/4, "the faults happened")
}

// rateLimited is a provider's refusal to answer with a Retry-After, as a
// node client that reads the header reports it (ledger.RetryAfterOf).
type rateLimited struct{ after time.Duration }

func (e rateLimited) Error() string             { return "429 Too Many Requests" }
func (e rateLimited) RetryAfter() time.Duration { return e.after }

// A provider's failure is never the task's: with every eth_estimateGas
// answered 429 (Retry-After: 1) for many runs, more than
// wallet.Config.MaxFailures of them, no task ends in error and the shard's
// failure count stays 0; the wallet asks again every second, and its tasks
// are sent once the rate limit stops.
func TestWallet_AGasEstimateTheProviderRateLimitsEndsNoTaskInErrorAndTheTasksGoOutWhenItStops(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.MaxFailures = 3 }})
	var limited atomic.Bool
	limited.Store(true)
	e.led.EstimateErr = func(ledger.CallMsg) error {
		if limited.Load() {
			return ledger.NewError(ledger.Transient, "429 Too Many Requests", rateLimited{time.Second})
		}
		return nil
	}
	tasks := e.postN(t, 3)
	const runs = 10
	for range runs {
		runPool(t, e.pool)
		e.clk.Advance(time.Second)
	}
	for i, task := range tasks {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status, "task %d", i)
	}
	s, err := e.st.ShardGet(t.Context(), e.key(0))
	require.NoError(t, err)
	require.Zero(t, s.Failures, "a rate limit is no failed run")
	require.Contains(t, s.LastError, "429 Too Many Requests", "the provider's failure is recorded for operators")
	require.GreaterOrEqual(t, e.led.Calls("EstimateGas"), runs, "the wallet asked again at every Retry-After")
	require.Empty(t, e.led.Sends())

	limited.Store(false)
	e.drive(t, e.pool, 10, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
}

// A provider's failure is never the task's, and a wallet whose provider
// recovers sends again within seconds: while the chain answers nothing for
// a minute, each run fails without counting as a failed run (the shard's
// failures stay 0) and waits only the provider's Retry-After (capped by
// workers.Config.UnavailableBackoff), not a backoff that grows to a minute;
// the first run after the recovery, at most that long after it, sends.
func TestWallet_AWalletWhoseChainStopsAnsweringSendsWithinSecondsOfItsRecoveryAndCountsNoFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	const hint = 1500 * time.Millisecond
	var down atomic.Bool
	down.Store(true)
	e.led.Down = func() error {
		if down.Load() {
			return fmt.Errorf("503 Service Unavailable: %w", rateLimited{hint})
		}
		return nil
	}
	tasks := e.postN(t, 3)
	e.runEverySecond(t, 60, func(s store.Shard) {
		require.Zero(t, s.Failures, "a chain that does not answer is no failed run")
		require.Equal(t, e.clk.Now().Add(hint), *s.ScheduledAt, "the next run waits the provider's Retry-After")
		require.Contains(t, s.LastError, "503 Service Unavailable")
	})
	require.GreaterOrEqual(t, e.led.TotalCalls(), 30, "the wallet kept asking, every 2 s of the minute")
	require.Empty(t, e.led.Sends())
	for i, task := range tasks {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status, "task %d", i)
	}

	down.Store(false)
	e.clk.Advance(e.wcfg.UnavailableBackoff)
	runPool(t, e.pool)
	require.NotEmpty(t, e.led.Sends(), "the wallet sends within %s of the recovery", e.wcfg.UnavailableBackoff)
	e.drive(t, e.pool, 10, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	s, err := e.st.ShardGet(t.Context(), e.key(0))
	require.NoError(t, err)
	require.Zero(t, s.Failures)
}

// downSigner is a signer whose backend cannot be reached while down is set.
type downSigner struct {
	keystore.Signer
	down  *atomic.Bool
	after time.Duration
	calls atomic.Int32
}

func (s *downSigner) Backend() string { return "test" }

func (s *downSigner) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, &keystore.UnavailableError{Backend: "test", Err: errors.New("connection refused"), RetryAfter: s.after}
	}
	return s.Signer.SignTx(ctx, tx, chainID)
}

// A signer that cannot be reached (an HSM, a KMS or a remote signer down or
// throttling) is not the tasks' failure: they wait, the run is released
// after the signer's Retry-After without counting a failure, nothing is
// sent, and once the signer is back they go out with contiguous nonces.
// The wallet's health shows the signer unavailable, with its error and
// since when, then ok once it signs again: two writes in all, however many
// refusals and signatures.
func TestWallet_AWalletWhoseSignerIsUnavailableWaitsAndCountsNoFailure(t *testing.T) {
	t.Parallel()
	const hint = 1500 * time.Millisecond
	var down atomic.Bool
	down.Store(true)
	var signer *downSigner
	m := metrics.New()
	e := setup(t, options{signer: func(s keystore.Signer) keystore.Signer {
		signer = &downSigner{Signer: s, down: &down, after: hint}
		return signer
	}, cfg: func(c *wallet.Config) { c.Metrics = m }})
	writes := countSignerWrites(t, e)
	tasks := e.postN(t, 3)
	var firstRefusal time.Time
	e.runEverySecond(t, 20, func(s store.Shard) {
		if firstRefusal.IsZero() && signer.calls.Load() > 0 {
			firstRefusal = e.clk.Now()
		}
		require.Zero(t, s.Failures, "a signer that cannot be reached is no failed run")
		if signer.calls.Load() > 0 {
			require.Equal(t, e.clk.Now().Add(hint), *s.ScheduledAt, "the next run waits the signer's Retry-After")
			require.Contains(t, s.LastError, "the test signer is unavailable")
		}
	})
	require.Positive(t, signer.calls.Load(), "the wallet asked the signer")
	require.EqualValues(t, signer.calls.Load(), m.SignerCallCount("test", "unavailable"), "each refusal is counted, by backend")
	require.Empty(t, e.led.Sends())
	for i, task := range tasks {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status, "task %d", i)
	}
	h := e.health(t)
	require.Equal(t, store.SignerUnavailable, h.Signer.State)
	require.Equal(t, "test", h.Signer.Backend)
	require.Equal(t, "the test signer is unavailable: connection refused", h.Signer.Error)
	require.Equal(t, firstRefusal, *h.Signer.Since, "since the first refusal")
	require.Greater(t, signer.calls.Load(), int32(1), "refused more than once")
	require.Equal(t, 1, writes(), "written once, at the transition")

	down.Store(false)
	e.clk.Advance(e.wcfg.UnavailableBackoff)
	back := e.clk.Now()
	e.drive(t, e.pool, 10, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	s, err := e.st.ShardGet(t.Context(), e.key(0))
	require.NoError(t, err)
	require.Zero(t, s.Failures)
	require.GreaterOrEqual(t, m.SignerCallCount("test", "ok"), int64(3), "the signatures are counted")
	h = e.health(t)
	require.Equal(t, store.SignerOK, h.Signer.State, "it signs again")
	require.Empty(t, h.Signer.Error)
	require.False(t, h.Signer.Since.Before(back), "since it signed again")
	require.Equal(t, 2, writes(), "ok written once for its signatures")

	// A healthy wallet writes nothing per signature.
	more := e.postN(t, 4)
	e.drive(t, e.pool, 10, more...)
	e.requireDoneOnce(t, more...)
	require.GreaterOrEqual(t, m.SignerCallCount("test", "ok"), int64(7))
	require.Equal(t, 2, writes(), "no write for the signatures of a healthy wallet")

	// A restarted process writes its first outcome once; the row already
	// says ok, so its time stays.
	since := *h.Signer.Since
	e.job, e.pool = e.newProcess(t, e.led)
	again := e.postN(t, 2)
	e.drive(t, e.pool, 10, again...)
	e.requireDoneOnce(t, again...)
	require.Equal(t, 3, writes(), "one write after the restart")
	require.Equal(t, since, *e.health(t).Signer.Since)
}

// countSignerWrites counts the signer state writes to e's wallet_health
// (store.WalletHealthSetSigner, each an INSERT with a signer state, whether
// or not it changes the row): a trigger in the test's own database.
func countSignerWrites(t *testing.T, e *env) func() int {
	t.Helper()
	ctx := t.Context()
	_, err := e.st.DB().Exec(ctx, `
		CREATE TABLE ledgerq.test_signer_writes (at timestamptz NOT NULL);
		CREATE FUNCTION ledgerq.test_signer_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO ledgerq.test_signer_writes VALUES (clock_timestamp()); RETURN NEW; END $$;
		CREATE TRIGGER test_signer_write BEFORE INSERT ON ledgerq.wallet_health
			FOR EACH ROW WHEN (NEW.signer_state IS NOT NULL) EXECUTE FUNCTION ledgerq.test_signer_write();`)
	require.NoError(t, err)
	return func() int {
		t.Helper()
		var n int
		require.NoError(t, e.st.DB().QueryRow(ctx, `SELECT count(*) FROM ledgerq.test_signer_writes`).Scan(&n))
		return n
	}
}
