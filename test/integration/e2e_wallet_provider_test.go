package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// providerMix is the fault mix of a hosted provider on a bad day: 10 %
// 429s (Retry-After 1 s), 5 % 502/503s, 3 % resets, 2 % lost send answers,
// 3 % answers slower than serve's --wallet-ledger-timeout (2 s), 10 %
// reads from a node 3 blocks behind.
func providerMix(seed int64) faultproxy.Config {
	return faultproxy.Config{Seed: seed, RateLimit: 0.10, RetryAfter: time.Second, BadGateway: 0.05,
		ResetBeforeForward: 0.03, LoseSendAnswer: 0.02, Slow: 0.03, SlowDelay: 5 * time.Second, Lag: 0.10, LagBlocks: 3}
}

// TestE2E_WalletLaneBehindAFaultyProviderSendsEveryTaskOnceAndNeverTakesBackDone
// is the wallet lane behind a hosted provider's failures: one geth --dev
// behind a fault-injecting proxy (providerMix), 3 keystore wallets, 2
// `serve` processes reading and sending through the proxy, ~150 tasks
// posted over REST while a serve process is SIGKILLed 3 times, then the
// faults stop. The verdict is the chain's, read from geth's blocks directly:
// every task's transaction mined exactly once with the hash the task
// records, nonces contiguous, every transaction of the wallets a task's or
// a no-op's; and the lane's: no task in error, none seen done and later not
// (task statuses are polled through the run), none done with a hash the
// chain lacks, at least half the sends of a fault-free baseline of the same
// lane go out during the faults, and every wallet sends within 30 s of the
// faults stopping.
//
// LEDGERQ_E2E_FAULT_SEED sets the draws.
func TestE2E_WalletLaneBehindAFaultyProviderSendsEveryTaskOnceAndNeverTakesBackDone(t *testing.T) {
	// Not parallel: its measure of throughput under faults against a
	// fault-free baseline wants the machine to itself, so it runs before
	// the package's parallel tests start.
	g := testgeth.Start(t)
	runProviderFaults(t, newProviderRun(t, gethNode(g), 3), providerLoad{baseEach: 3 * 17, faultEach: 17, faultWindow: 50 * time.Second})
}

// providerLoad is the load of a runProviderFaults: tasks a wallet in the
// fault-free baseline, tasks a wallet before each of the 3 SIGKILLs under
// faults, and how long the faults last.
type providerLoad struct {
	baseEach, faultEach int
	faultWindow         time.Duration
}

// runProviderFaults is TestE2E_WalletLaneBehindAFaultyProvider…'s run and
// verdict on r: a fault-free baseline, then providerMix for
// load.faultWindow while tasks are posted and a serve process is SIGKILLed
// 3 times, then the faults stop.
func runProviderFaults(t *testing.T, r *providerRun, load providerLoad) {
	t.Helper()
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(uint64(seed), 38))
	r.startServes(2)
	r.watchStatuses()

	// A fault-free baseline of the same load.
	baseFrom, baseBegan := r.head(), time.Now()
	r.postEach(load.baseEach)
	r.awaitEnded(2 * time.Minute)
	baseTook, baseTo := time.Since(baseBegan), r.head()

	// The faults, for faultWindow, while tasks are posted and a serve
	// process is SIGKILLed 3 times.
	faultWindow := load.faultWindow
	require.NoError(t, r.proxy.Set(providerMix(seed)))
	faultFrom, faultBegan := r.head(), time.Now()
	for range 3 {
		r.postEach(load.faultEach)
		time.Sleep(time.Duration(2000+rnd.IntN(6000)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
		r.killAServe(rnd)
	}
	time.Sleep(time.Until(faultBegan.Add(faultWindow))) // the faults last this long: the fault is the point
	require.NoError(t, r.proxy.Set(faultproxy.Config{}))
	faultTook, faultTo := time.Since(faultBegan), r.head()
	faultCounts := r.proxy.Counts()

	// Every wallet sends again: a nonce the node has not seen when the
	// faults stop (its pending nonce then) is taken within 30 s.
	stopped := time.Now()
	pendingAtStop := r.pendingNonces()
	r.postEach(1)
	resumed := r.awaitSends(pendingAtStop, 30*time.Second)
	for i, d := range resumed {
		if d < 0 {
			r.problem("wallet %s sent nothing within 30 s of the faults stopping (pending nonce %d then)", r.names[i], pendingAtStop[i])
		} else {
			t.Logf("wallet %s sent again %s after the faults stopped", r.names[i], d.Round(100*time.Millisecond))
		}
	}
	if !r.awaitEndedOr(90 * time.Second) {
		r.problem("not every task ended within 90 s of the faults stopping (%s after)", time.Since(stopped).Round(time.Second))
	}
	r.stopWatch()
	r.stopServes()

	verdict := r.checkChain()
	baseSends, faultSends := verdict.minedIn(baseFrom, baseTo), verdict.minedIn(faultFrom, faultTo)
	baseRate := float64(baseSends) / baseTook.Seconds()
	t.Logf("baseline without faults: %d sends in %s (%.2f/s, blocks %d–%d); under faults: %d sends in %s (%.2f/s, blocks %d–%d); proxy counts %v; calls by method over the run %v",
		baseSends, baseTook.Round(time.Second), baseRate, baseFrom+1, baseTo, faultSends, faultTook.Round(time.Second),
		float64(faultSends)/faultTook.Seconds(), faultFrom+1, faultTo, faultCounts, r.proxy.MethodCounts())
	// The tasks the faults had to send are the fault run's: a lane faster
	// than the backlog cannot send more.
	want := min(baseRate*faultTook.Seconds(), float64(len(r.wallets)*3*load.faultEach)) / 2
	if float64(faultSends) < want {
		r.problem("under faults %d sends went out, fewer than half the fault-free rate's %.0f", faultSends, 2*want)
	}
	r.report()
}

// TestE2E_WalletLaneARateLimitedGasEstimateEndsNoTaskInError answers every
// eth_estimateGas with a 429 (Retry-After 1 s) for a while, and nothing
// else: the node is reachable and every task a valid transfer from a funded
// wallet, so when the rate limit ends, every task ends done, none in error.
//
// LEDGERQ_E2E_ESTIMATE_429_FOR sets how long the rate limit lasts (30 s by
// default); serve's shards back off at most 1 s, so a lane that counted the
// 429s against the task at the head of its queue would end it in error
// (10 failed runs in a row) well within it.
func TestE2E_WalletLaneARateLimitedGasEstimateEndsNoTaskInError(t *testing.T) {
	t.Parallel()
	r := newProviderRun(t, gethNode(testgeth.Start(t)), 3)
	// A short backoff: a lane that counted the 429s against the task at
	// the head of its queue would fail it (10 failed runs) well within the
	// rate limit's 30 s.
	r.args = append(r.args, "--shard-max-backoff", "1s")
	require.NoError(t, r.proxy.Set(faultproxy.Config{Methods: []string{"eth_estimateGas"}, RateLimit: 1, RetryAfter: time.Second}))
	r.startServes(1)
	r.watchStatuses()
	limitFor := 30 * time.Second
	if s := os.Getenv("LEDGERQ_E2E_ESTIMATE_429_FOR"); s != "" {
		var err error
		limitFor, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	r.postEach(5)
	time.Sleep(limitFor) // the rate limit lasts this long: the fault is the point
	counts := r.proxy.Counts()
	require.NoError(t, r.proxy.Set(faultproxy.Config{}))
	if !r.awaitEndedOr(90 * time.Second) {
		r.problem("not every task ended within 90 s of the rate limit ending")
	}
	r.stopWatch()
	r.stopServes()
	r.checkChain()
	t.Logf("eth_estimateGas answered 429 %d times in %s", counts[faultproxy.CountRateLimit], limitFor)
	r.report()
}

func faultSeed(t *testing.T) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("LEDGERQ_E2E_FAULT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (LEDGERQ_E2E_FAULT_SEED)", seed)
	return seed
}

// providerRun is a chainRun whose serve processes reach their node
// through a fault proxy, with the verdict's problems collected, so that a
// run reports every broken rule with its numbers rather than the first.
type providerRun struct {
	*chainRun
	proxy *faultproxy.Proxy // nil when the run's chains declare nodes of their own
	st    *store.Store

	// refusedStarts counts serve processes that exited before they were
	// ready (the node did not answer their start).
	refusedStarts int

	pmu      sync.Mutex
	problems []string

	watchStop chan struct{}
	watchDone chan struct{}
	// Seen by the status watch, by task id: the hash each task was first
	// seen done with, and the tasks seen done and later not.
	seenDone    map[string]seenTask
	doneThenNot map[string]seenTask
	// explainDoneThenNot, when set, tells a task seen done and later not
	// that the run's own faults explain (a reorganisation as deep as the
	// confirmations, a node that lost blocks) from a problem: given what
	// the watch saw of the task, it returns why.
	explainDoneThenNot func(seen seenTask) (string, bool)
}

// newProviderRun is a run of wallets w0, w1, … on the node n, which serve
// reaches through a fault proxy (faultless until Set).
func newProviderRun(t *testing.T, n *testNode, wallets int) *providerRun {
	t.Helper()
	p, err := faultproxy.New(n.url, faultproxy.Config{})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	url, err := p.Start()
	require.NoError(t, err)
	c := newChainRun(t, n, wallets)
	for i, a := range c.args {
		if a == "--wallet-ledger-url" {
			c.args[i+1] = url
		}
	}
	r := newProviderRunOf(c)
	r.proxy = p
	return r
}

// newProviderRunOf watches and judges the run c, whose serve processes
// reach their nodes as c's arguments say.
func newProviderRunOf(c *chainRun) *providerRun {
	c.t.Helper()
	st, err := store.OpenPool(ctxT(c.t, 10*time.Second), c.db, 0)
	require.NoError(c.t, err)
	c.t.Cleanup(st.Close)
	r := &providerRun{chainRun: c, st: st, seenDone: map[string]seenTask{}, doneThenNot: map[string]seenTask{}}
	c.start = r.startServe
	return r
}

// seenTask is a task as the status watch saw it: its wallet, the hash it
// was first seen done with, and, when it was first seen not done later,
// what and when.
type seenTask struct {
	w    int
	hash string
	what string
	at   time.Time
}

func (r *providerRun) problem(format string, args ...any) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// report fails the test with every problem found.
func (r *providerRun) report() {
	r.t.Helper()
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.refusedStarts > 0 {
		r.t.Logf("%d serve processes exited before they were ready", r.refusedStarts)
	}
	for _, p := range r.problems {
		r.t.Errorf("%s", p)
	}
}

// startServe starts a serve process, again whenever one exits before it is
// ready.
func (r *providerRun) startServe() (*testproc.Proc, string) {
	r.t.Helper()
	env := []string{"DATABASE_URL=" + r.db}
	if level := os.Getenv("LEDGERQ_E2E_LOG_LEVEL"); level != "" {
		env = append(env, "LEDGERQ_LOG_LEVEL="+level) // serve's logs in the test's output
	}
	for attempt := 1; ; attempt++ {
		addr := testproc.FreeAddr(r.t)
		p := testproc.Start(r.t, r.dir, env, append(append([]string(nil), r.args...), "--api-addr", addr)...)
		api := "http://" + addr
		if waitReadyOrExit(p, api+"/readyz") {
			return p, api
		}
		r.refusedStarts++
		lines := strings.Split(strings.TrimSpace(p.Stderr.String()), "\n")
		r.t.Logf("serve exited before it was ready (start %d): %s", attempt, lines[len(lines)-1])
		require.Less(r.t, attempt, 20, "serve never started")
		time.Sleep(500 * time.Millisecond) // a pause before starting it again
	}
}

// waitReadyOrExit reports whether p's /readyz answers 200 within a minute,
// and false as soon as p exits.
func waitReadyOrExit(p *testproc.Proc, url string) bool {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done():
			return false
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond) // the poll interval of this wait on a condition
	}
	return false
}

// stopServes stops the serve processes with SIGTERM.
func (r *providerRun) stopServes() {
	r.t.Helper()
	for _, p := range r.serves {
		p.Signal(r.t, syscall.SIGTERM)
		if code := p.Wait(r.t, 30*time.Second); code != 0 {
			r.problem("serve exited %d after SIGTERM", code)
		}
	}
}

// head is the head of the first wallet's node, read from the node itself.
func (r *providerRun) head() uint64 {
	r.t.Helper()
	h, err := r.nodes[0].client.BlockNumber(ctxT(r.t, 10*time.Second))
	require.NoError(r.t, err)
	return h
}

// pendingNonces are the wallets' pending nonces by their nodes themselves.
func (r *providerRun) pendingNonces() []uint64 {
	r.t.Helper()
	out := make([]uint64, len(r.wallets))
	for i, w := range r.wallets {
		n, err := r.nodes[i].client.PendingNonceAt(ctxT(r.t, 10*time.Second), w)
		require.NoError(r.t, err)
		out[i] = n
	}
	return out
}

// awaitSends waits until each wallet's pending nonce passes from[i], for at
// most timeout, and returns how long each took (-1: not within timeout).
func (r *providerRun) awaitSends(from []uint64, timeout time.Duration) []time.Duration {
	r.t.Helper()
	began := time.Now()
	took := make([]time.Duration, len(from))
	for i := range took {
		took[i] = -1
	}
	for time.Since(began) < timeout {
		waiting := false
		for i, n := range r.pendingNonces() {
			if took[i] < 0 && n > from[i] {
				took[i] = time.Since(began)
			}
			waiting = waiting || took[i] < 0
		}
		if !waiting {
			break
		}
		time.Sleep(100 * time.Millisecond) // the poll interval of this wait on a condition
	}
	return took
}

// awaitEndedOr reports whether every task posted ended within timeout.
func (r *providerRun) awaitEndedOr(timeout time.Duration) bool {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ended := true
		for w := range r.wallets {
			tasks := r.tasks(w)
			for _, id := range r.ids[w] {
				if task, ok := tasks[id]; !ok || !task.Status.Terminal() {
					ended = false
				}
			}
		}
		if ended {
			return true
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of this wait on a condition
	}
	return false
}

// tasks are wallet w's tasks by id, from the database.
func (r *providerRun) tasks(w int) map[string]store.Task {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := r.st.TaskList(ctx, store.TaskListParams{Wallet: r.names[w], Limit: 10000})
	require.NoError(r.t, err)
	out := make(map[string]store.Task, len(list))
	for _, task := range list {
		out[task.ID] = task
	}
	return out
}

// watchStatuses polls every task's status until stopWatch, and records the
// tasks seen done and later not done.
func (r *providerRun) watchStatuses() {
	r.watchStop, r.watchDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.watchDone)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.watchStop:
				return
			case <-tick.C:
			}
			for w := range r.wallets {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				list, err := r.st.TaskList(ctx, store.TaskListParams{Wallet: r.names[w], Limit: 10000})
				cancel()
				if err != nil {
					r.problem("watching the tasks' statuses: %v", err)
					return
				}
				r.pmu.Lock()
				for _, task := range list {
					seen, ok := r.seenDone[task.ID]
					switch {
					case task.Status == store.TaskDone && !ok:
						r.seenDone[task.ID] = seenTask{w: w, hash: task.TxHash}
					case ok && task.Status != store.TaskDone:
						if _, noted := r.doneThenNot[task.ID]; !noted {
							seen.what = fmt.Sprintf("done with %s, then %s (reorgs %d)", seen.hash, task.Status, task.Reorgs)
							seen.at = time.Now()
							r.doneThenNot[task.ID] = seen
						}
					}
				}
				r.pmu.Unlock()
			}
		}
	}()
}

func (r *providerRun) stopWatch() {
	close(r.watchStop)
	<-r.watchDone
}

// chainVerdict is what the chain holds of the wallets.
type chainVerdict struct {
	mined [][]testgeth.MinedTx // by wallet
	// onChain indexes mined by hash.
	onChain []map[common.Hash]testgeth.MinedTx
}

// minedIn counts the wallets' transactions mined in blocks from+1 to to.
func (v chainVerdict) minedIn(from, to uint64) int {
	n := 0
	for _, txs := range v.mined {
		for _, tx := range txs {
			if tx.Block > from && tx.Block <= to {
				n++
			}
		}
	}
	return n
}

// checkChain reads every block from each wallet's node itself and records
// a problem for each broken rule: a task's transaction not mined exactly
// once, a done task whose hash is not its mined transaction's (or a hash it
// was seen done with that its chain lacks), a task in error or not ended, a
// nonce gap, a transaction of a wallet that no task or no-op explains, a
// task seen done and later not (unless explainDoneThenNot explains it), an
// exception of `ledgerq wallet audit`.
func (r *providerRun) checkChain() chainVerdict {
	r.t.Helper()
	ctx := context.Background()
	var v chainVerdict
	onChain := make([]map[common.Hash]testgeth.MinedTx, len(r.wallets)) // by wallet
	done, failed, open, noops, reorged := 0, 0, 0, 0, 0
	for w, addr := range r.wallets {
		mined, err := testgeth.MinedFrom(ctx, r.nodes[w].url, addr)
		require.NoError(r.t, err)
		v.mined = append(v.mined, mined)
		if err := testgeth.CheckNonces(mined); err != nil {
			r.problem("wallet %s: %v", r.names[w], err)
		}
		if len(mined) > 0 && mined[0].Nonce != 0 {
			r.problem("wallet %s: its first mined nonce is %d", r.names[w], mined[0].Nonce)
		}
		byHash, err := testgeth.ByHash(mined)
		require.NoError(r.t, err)
		onChain[w] = byHash
		tasks := r.tasks(w)
		explained := map[common.Hash]bool{}
		for _, id := range r.ids[w] {
			task := tasks[id]
			var withData []testgeth.MinedTx
			for _, tx := range mined {
				if bytes.Equal(tx.Data, r.data[id]) {
					withData = append(withData, tx)
				}
			}
			for _, tx := range withData {
				explained[tx.Hash] = true
			}
			reorged += task.Reorgs
			if len(withData) > 1 {
				r.problem("task %s of %s: its call data is mined %d times", id, r.names[w], len(withData))
			}
			switch task.Status {
			case store.TaskDone:
				done++
				switch {
				case len(withData) == 0:
					r.problem("task %s of %s is done with %s but its call data is not mined", id, r.names[w], task.TxHash)
				case withData[0].Hash != common.HexToHash(task.TxHash):
					r.problem("task %s of %s is done with %s but the chain mined %s", id, r.names[w], task.TxHash, withData[0].Hash.Hex())
				}
			case store.TaskError:
				failed++
				r.problem("task %s of %s ended in error: %s", id, r.names[w], task.Error)
			default:
				open++
				r.problem("task %s of %s is still %s", id, r.names[w], task.Status)
			}
		}
		rows, err := r.st.Conns().Query(ctx, `SELECT tx_hash FROM ledgerq.tx_attempts WHERE chain_id = $1 AND sender = $2 AND task_id IS NULL`, r.nodes[w].chainID, strings.ToLower(addr.Hex()))
		require.NoError(r.t, err)
		for rows.Next() {
			var h string
			require.NoError(r.t, rows.Scan(&h))
			if tx, ok := byHash[common.HexToHash(h)]; ok {
				explained[tx.Hash] = true
				noops++
			}
		}
		require.NoError(r.t, rows.Err())
		rows.Close()
		for _, tx := range mined {
			if !explained[tx.Hash] {
				r.problem("mined transaction %s of %s at nonce %d is no task's and no no-op's", tx.Hash.Hex(), r.names[w], tx.Nonce)
			}
		}
		rep, failure := auditWalletReport(r.t, r.db, r.nodes[w].url, addr)
		switch {
		case failure != "":
			r.problem("wallet %s: %s", r.names[w], failure)
		case rep.Transactions != len(mined):
			r.problem("wallet %s: the audit read %d transactions, the block scan %d", r.names[w], rep.Transactions, len(mined))
		}
	}
	r.pmu.Lock()
	doneThenNot, explainedBack, missing := len(r.doneThenNot), 0, 0
	for id, seen := range r.doneThenNot {
		if r.explainDoneThenNot != nil {
			if why, ok := r.explainDoneThenNot(seen); ok {
				explainedBack++
				r.t.Logf("task %s of %s was seen %s: %s", id, r.names[seen.w], seen.what, why)
				continue
			}
		}
		r.problems = append(r.problems, fmt.Sprintf("task %s of %s was seen %s", id, r.names[seen.w], seen.what))
	}
	for id, seen := range r.seenDone {
		if _, ok := onChain[seen.w][common.HexToHash(seen.hash)]; !ok {
			missing++
			r.problems = append(r.problems, fmt.Sprintf("task %s of %s was seen done with %s, which its chain lacks", id, r.names[seen.w], seen.hash))
		}
	}
	r.pmu.Unlock()
	r.t.Logf("%d tasks on %d wallets: %d done, %d in error, %d not ended; %d seen done and later not (%d of them explained by the run's faults), %d seen done with a hash the chain lacks; %d no-ops mined; %d serve SIGKILLs; %d reorgs counted by tasks",
		r.n, len(r.wallets), done, failed, open, doneThenNot, explainedBack, missing, noops, r.kills, reorged)
	v.onChain = onChain
	return v
}
