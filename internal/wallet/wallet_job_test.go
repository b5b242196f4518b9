package wallet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// engine-core's EOA run with Hathor's queue: every task posted for a wallet ends done
// exactly once, one mined transaction per nonce, nonces contiguous from the
// chain's nonce and assigned in queue order (priority: highest first, then
// oldest; fifo: oldest first).
func TestWallet_TasksEndDoneOnceWithContiguousNoncesInQueueOrder(t *testing.T) {
	t.Parallel()
	for _, queue := range []store.QueueType{store.QueuePriority, store.QueueFIFO} {
		t.Run(string(queue), func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{cfg: func(c *wallet.Config) { c.QueueType = queue }})
			// The wallet has used nonces 0 and 1 before ledgerq.
			e.sendOutside(t, 0, 0)
			e.sendOutside(t, 0, 1)
			e.chain.Mine()
			priorities := []int32{0, 5, 0, 9, 5, 0, 9, 1}
			var tasks []store.Task
			for i, p := range priorities {
				tasks = append(tasks, e.post(t, 0, p, int64(1000+i), nil))
			}
			e.drive(t, e.pool, 20, tasks...)
			nonces := e.requireDoneOnce(t, tasks...)
			e.requireContiguous(t, 0, 2, nonces)
			e.requireOneTxPerNonce(t, 0)

			want := queueOrder(tasks, queue)
			got := make([]string, len(tasks))
			for i, task := range tasks {
				got[nonces[i]-2] = task.ID
			}
			require.Equal(t, want, got, "nonces follow the queue order")
		})
	}
}

// katana's "a cycle fits well inside the lease" with a node that answers
// slowly: past wallet.Config.CycleBudget a cycle makes no new ledger call and
// leaves the rest to the next cycle — yet every cycle makes one, so the work
// moves.
func TestWallet_ACycleMakesNoLedgerCallPastItsBudget(t *testing.T) {
	t.Parallel()
	for _, gasGiven := range []bool{false, true} {
		t.Run(fmt.Sprintf("gas given %v", gasGiven), func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{cfg: func(c *wallet.Config) { c.CycleBudget = time.Nanosecond }})
			tasks := e.postN(t, 4)
			if gasGiven {
				_, err := e.st.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_tasks SET gas_limit = 21000`)
				require.NoError(t, err)
			}
			perCycle := map[string][]int{}
			e.crashedRun(t, e.job, 0, func(cyc workers.Cycle, step string) bool {
				kind := fmt.Sprintf("%T", cyc)
				switch step {
				case "execute":
					perCycle[kind] = append(perCycle[kind], e.led.TotalCalls())
				case "commit":
					last := len(perCycle[kind]) - 1
					perCycle[kind][last] = e.led.TotalCalls() - perCycle[kind][last]
				}
				isBroadcast := isCycle(cyc, "*submitter.broadcastCycle")
				return isBroadcast && step == "commit" && len(perCycle[kind]) == len(tasks)
			})
			if gasGiven {
				// One send signs all four (the fee suggestion and the
				// four preflights); each broadcast cycle sends one.
				require.Equal(t, []int{5}, perCycle["*queuer.sendCycle"])
			} else {
				// The send: the fee suggestion and its first round of
				// preflights and estimates, asked at once (a round lasts
				// one ledger timeout at most, as one call does).
				require.Equal(t, []int{9}, perCycle["*queuer.sendCycle"])
			}
			require.Equal(t, []int{1, 1, 1, 1}, perCycle["*submitter.broadcastCycle"])
			require.Equal(t, len(tasks), len(e.led.Sends()))
		})
	}
}

// Tasks that arrive one by one go out in rounds: a send that would not fill
// the wallet's in-flight budget waits, in its run, until
// wallet.Config.SendLinger has passed since the wallet's last send (its
// broadcast included); the first send of a quiet wallet, and a send that
// fills the budget, go at once.
func TestWallet_ASendThatWouldNotFillTheBudgetWaitsForMoreTasks(t *testing.T) {
	t.Parallel()
	const linger = 400 * time.Millisecond
	e := setup(t, options{cfg: func(c *wallet.Config) { c.SendLinger, c.InFlight = linger, 4 }})
	ctx := t.Context()
	first := e.post(t, 0, 0, 1, nil)
	now := e.clk.Now()
	c, err := e.st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "test/0", LeaseUntil: now.Add(e.wcfg.Lease), Kinds: []string{wallet.Kind}})
	require.NoError(t, err)
	// cycle runs the run's next cycle and returns it, with when its collect
	// began and how long it took.
	cycle := func() (workers.Cycle, time.Time, time.Duration) {
		t.Helper()
		began := time.Now()
		cyc, err := e.job.Collect(ctx, c)
		took := time.Since(began)
		require.NoError(t, err)
		require.NotNil(t, cyc, "the run ended")
		require.NoError(t, cyc.Execute(ctx))
		require.NoError(t, cyc.Commit(ctx))
		return cyc, began, took
	}
	// untilBroadcast runs cycles until one broadcasts, each collected at
	// once, and returns when that one's collect began.
	untilBroadcast := func(what string) time.Time {
		t.Helper()
		for range 10 {
			cyc, began, took := cycle()
			require.Less(t, took, linger/2, "%s: %T waited", what, cyc)
			if isCycle(cyc, "*submitter.broadcastCycle") {
				return began
			}
		}
		t.Fatalf("%s: no broadcast", what)
		return time.Time{}
	}
	broadcast := untilBroadcast("the first send of a quiet wallet")
	require.Len(t, e.attempts(t, first), 1)

	// One task more, with room for three in flight: its send waits.
	second := e.post(t, 0, 0, 2, nil)
	cyc, _, _ := cycle()
	require.True(t, isCycle(cyc, "*queuer.sendCycle"), "got %T", cyc)
	require.GreaterOrEqual(t, time.Since(broadcast), linger, "the second send did not wait for more tasks")
	require.Len(t, e.attempts(t, second), 1)
	untilBroadcast("the second send's broadcast")

	// Two tasks more fill the budget (two in flight, nothing mined): at once.
	third, fourth := e.post(t, 0, 0, 3, nil), e.post(t, 0, 0, 4, nil)
	untilBroadcast("a send that fills the budget")
	require.Len(t, e.attempts(t, third), 1)
	require.Len(t, e.attempts(t, fourth), 1)
	require.Len(t, e.led.Sends(), 4)
}

// A run back on the chain head its wallet's last confirm pass in this
// process read (a run that yielded its worker and was claimed again) goes
// on with what that pass read and sends, without the pass: under a slow
// provider the pass would take each run's quantum and the wallet would
// never reach its send. A new head, or no head watcher, makes the pass run.
func TestWallet_ARunBackOnTheHeadItsWalletWasConfirmedOnSendsWithoutAskingAgain(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	head, err := e.chain.HeadBlock(t.Context())
	require.NoError(t, err)
	e.job.NoteHead(head)
	e.post(t, 0, 0, 1000, nil)
	runPool(t, e.pool)
	reads := e.led.Calls("NonceAt")
	require.Positive(t, reads, "the first run confirms")

	e.job.NoteHead(head)
	second := e.post(t, 0, 0, 1001, nil)
	runPool(t, e.pool)
	require.Len(t, e.attempts(t, second), 1, "the task posted since is sent")
	require.Equal(t, reads, e.led.Calls("NonceAt"), "on the same head, no second confirm pass")

	e.chain.Mine()
	next, err := e.chain.HeadBlock(t.Context())
	require.NoError(t, err)
	e.job.NoteHead(next)
	third := e.post(t, 0, 0, 1002, nil)
	runPool(t, e.pool)
	require.Len(t, e.attempts(t, third), 1)
	require.Greater(t, e.led.Calls("NonceAt"), reads, "a new head is confirmed again")
}

// A run whose confirm pass took its whole quantum (a slow provider: every
// pass outlasts a block) yields its worker before it sends; the next run,
// although the chain has a new head by then, goes on with what that pass
// read and sends, and the run after it confirms again. A pass in every run
// would leave the wallet confirming forever and never sending.
func TestWallet_ARunAfterAConfirmPassThatTookItsQuantumSendsThoughTheHeadMoved(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	slow := &slowConfirms{WalletLedger: e.led, e: e, t: t}
	job, pool := e.newProcess(t, slow)
	slow.job = job
	head, err := e.chain.HeadBlock(t.Context())
	require.NoError(t, err)
	job.NoteHead(head)

	task := e.post(t, 0, 0, 1000, nil)
	for run := 1; run <= 6 && len(e.attempts(t, task)) == 0; run++ {
		_, err := pool.RunOnce(t.Context())
		require.NoError(t, err)
	}
	require.Len(t, e.attempts(t, task), 1, "the task is sent within a few runs")
	require.Equal(t, 1, e.led.Calls("NonceAt"), "one confirm pass before the send")

	// The send was the carried run's: the next run confirms again.
	e.post(t, 0, 0, 1001, nil)
	_, err = pool.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, e.led.Calls("NonceAt"), "a run after a send confirms again")
}

// slowConfirms is a ledger whose nonce reads each take a worker's whole
// quantum, with a block mined meanwhile (the head watcher tells the job).
type slowConfirms struct {
	*ledgertest.WalletLedger
	e   *env
	t   *testing.T
	job *wallet.Job
}

func (l *slowConfirms) NonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	n, err := l.WalletLedger.NonceAt(ctx, a)
	l.e.clk.Advance(2 * l.e.wcfg.Quantum)
	l.e.chain.Mine()
	head, herr := l.e.chain.HeadBlock(ctx)
	require.NoError(l.t, herr)
	l.job.NoteHead(head)
	return n, err
}

// A send reads the fee suggestion while it estimates the gas, not before:
// under a slow provider each is a round trip, or a Retry-After, of its own.
func TestWallet_ASendReadsTheFeeSuggestionWhileItEstimatesTheGas(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	// A call that finds the other in flight marks the overlap; else it
	// waits up to 2 s for the other to start. A fee read of another cycle,
	// alone, waits those 2 s out and leaves nothing behind; a send that
	// makes the two calls one after the other never overlaps them.
	var inFees, inEstimate atomic.Int32
	var overlapped atomic.Bool
	during := func(self, other *atomic.Int32) {
		self.Add(1)
		defer self.Add(-1)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if other.Load() > 0 {
				overlapped.Store(true)
				return
			}
		}
	}
	e.led.OnSuggestFees = func() { during(&inFees, &inEstimate) }
	e.led.EstimateErr = func(ledger.CallMsg) error {
		during(&inEstimate, &inFees)
		return nil
	}
	task := e.post(t, 0, 0, 1000, nil)
	e.drive(t, e.pool, 5, task)
	e.requireDoneOnce(t, task)
	require.True(t, overlapped.Load(), "the gas was estimated while the fees were read")
}
