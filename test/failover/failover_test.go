package failover

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// The lanes, as the test names them in its output.
const (
	laneBatch   = "batch"
	laneWallet  = "wallet"
	laneBuilder = "builder"
)

var lanes = []string{laneBatch, laneWallet, laneBuilder}

// progressSQL reads, per lane, the time of its latest step forward that
// only a working database allows: a batch recorded committed, a task done,
// a bundle finalized.
var progressSQL = map[string]string{
	laneBatch:   `SELECT finished_at FROM ledgerq.batches WHERE status = 'committed' AND finished_at > $1 ORDER BY finished_at`,
	laneWallet:  `SELECT finished_at FROM ledgerq.wallet_tasks WHERE status = 3 AND finished_at > $1 ORDER BY finished_at`,
	laneBuilder: `SELECT finalized_at FROM ledgerq.bundles WHERE state = 'finalized' AND finalized_at > $1 ORDER BY finalized_at`,
}

// TestFailover_PrimaryKilledUnderLoadLosesNothingAndSendsNothingTwice runs
// ledgerq against a pg_auto_failover formation, puts load on every lane,
// and SIGKILLs the primary (its pg_autoctl, postmaster and backends) five
// times, each time letting the monitor promote the secondary and bringing
// the killed node back as the new secondary. Every answer the clients get
// is recorded: 503 with Retry-After while there is no primary, never
// another 5xx. Afterwards every accepted batch is committed once by the
// Sawtooth ledger, every task's transaction mined once by geth with
// contiguous nonces, every pool transaction executed once by the JAM chain.
// It reports how long each lane stood still around each failover.
//
// It is skipped under -short, and without pg_auto_failover or geth (it
// fails instead under CI=true); `make failover-test` runs it.
// LEDGERQ_FAILOVER_KILLS sets the number of failovers (default 5);
// LEDGERQ_FAILOVER_SERVE_LOG=FILE keeps ledgerq serve's whole log.
func TestFailover_PrimaryKilledUnderLoadLosesNothingAndSendsNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: it runs a pg_auto_failover formation, geth and ledgerq for a few minutes (make failover-test)")
	}
	requireFormationTools(t)
	testgeth.Binary(t)
	kills := 5
	if s := os.Getenv("LEDGERQ_FAILOVER_KILLS"); s != "" {
		var err error
		kills, err = strconv.Atoi(s)
		require.NoError(t, err, "LEDGERQ_FAILOVER_KILLS")
	}
	r := setup(t)

	r.logf("load on: batches to /v1/batches, send-tx tasks to /v1/wallets/%s/send-tx, transactions to /rpc", walletName)
	r.startLoad()
	r.awaitProgress(r.began, time.Minute)
	for i := range kills {
		r.failover(i + 1)
	}
	r.awaitProgress(r.failovers[len(r.failovers)-1].rejoined, time.Minute)
	r.logf("load off")
	r.stopLoad()
	r.awaitFinal(3 * time.Minute)
	r.logf("every accepted item is final; checking the ledgers")

	r.checkAnswers()
	batches := r.checkBatches()
	tasks, noops := r.checkWallet()
	txs, bundles := r.checkBuilder()
	r.report(batches, tasks, noops, txs, bundles)
}

// run is the state of one failover run.
type run struct {
	t     *testing.T
	began time.Time
	f     *formation
	geth  *testgeth.Node
	db    *store.Store

	api         string
	sawtoothURL string
	jamURL      string
	serve       *testproc.Proc
	wallet      common.Address
	token       string

	answers *answers
	load    *load

	failovers []failoverTimes
}

// failoverTimes is one failover: when the primary was killed, when the
// other node took writes (wait_primary), when the killed one was back as
// its synchronous secondary.
type failoverTimes struct {
	node string
	// fenced: the primary turned read-only fenceFor before it was killed.
	fenced bool
	// down is when the primary stopped taking writes: fenced or killed.
	down, killed, promoted, rejoined time.Time
	// readOnly is when a fenced primary's new sessions were read-only.
	readOnly time.Time
}

// fenceFor is how long a fenced primary answers read-only before its kill.
const fenceFor = 2 * time.Second

func (r *run) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("[%6.1fs] %s", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// setup starts geth, the formation, the two simulated ledgers and `ledgerq
// serve` with every lane on, and creates the wallet and its API key.
func setup(t *testing.T) *run {
	t.Helper()
	r := &run{t: t, began: time.Now(), answers: newAnswers()}
	r.logf("building ledgerq (with the race detector)")
	testproc.Binary(t)
	r.logf("starting geth --dev")
	r.geth = testgeth.Start(t)
	r.logf("starting pg_auto_failover: a monitor, a primary and a synchronous secondary")
	r.f = startFormation(t)
	r.logf("formation up; ledgerq's DATABASE_URL is %s", r.f.URL())

	dir := t.TempDir()
	sawAddr, jamAddr := testproc.FreeAddr(t), testproc.FreeAddr(t)
	saw := testproc.Start(t, dir, nil, "simledger", "--addr", sawAddr, "--log-level", "warn")
	jam := testproc.Start(t, dir, nil, "simledger", "--kind", "jam", "--addr", jamAddr, "--log-level", "warn", "--jam-slot-length", "400ms")
	r.sawtoothURL, r.jamURL = "http://"+sawAddr, "http://"+jamAddr
	testproc.WaitHTTP(t, saw, r.sawtoothURL+"/debug/stats", 200, time.Minute)
	testproc.WaitHTTP(t, jam, r.jamURL+"/debug/stats", 200, time.Minute)
	r.logf("simulated Sawtooth ledger at %s, simulated JAM chain at %s", r.sawtoothURL, r.jamURL)

	passFile := filepath.Join(dir, "passphrase")
	require.NoError(t, os.WriteFile(passFile, []byte("failover test\n"), 0o600))
	out := testproc.Run(t, dir, nil, "wallet", "new", "--keystore-dir", filepath.Join(dir, "keystore"), "--light-kdf",
		"--passphrase-file", passFile, "--name", walletName)
	var addr, keystoreFile string
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "address:"); ok {
			addr = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "keystore:"); ok {
			keystoreFile = strings.TrimSpace(v)
		}
	}
	require.True(t, common.IsHexAddress(addr), "ledgerq wallet new printed %q", out)
	r.wallet = common.HexToAddress(addr)
	r.geth.Fund(t, r.wallet, new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18)))
	r.logf("wallet %s is %s, funded on geth", walletName, addr)

	env := []string{"DATABASE_URL=" + r.f.URL()}
	testproc.Run(t, dir, env, "migrate", "up")
	r.token = strings.TrimSpace(testproc.Run(t, dir, env, "keys", "create", "--name", "failover test", "--scope", "wallet:"+walletName+",service:*"))
	r.serve, r.api = testproc.StartReady(t, dir, env, "serve", "--log-level", "info",
		"--poll-interval", "200ms", "--shutdown-timeout", "5s",
		"--batch-ledger", "sawtooth", "--batch-ledger-url", r.sawtoothURL, "--batch-claim-lease", "10s", "--batch-ledger-timeout", "3s",
		"--wallet-keystore", walletName+"="+keystoreFile, "--wallet-passphrase-file", passFile,
		"--wallet-ledger", "evm", "--wallet-ledger-url", r.geth.URL, "--wallet-ledger-timeout", "2s", "--wallet-cycle-budget", "1s",
		"--wallet-follow-interval", "200ms", "--shard-lease", "6s", "--wallet-rebroadcast-after", "5s",
		"--builder", "--builder-ledger", "jam", "--builder-ledger-url", r.jamURL, "--builder-chain-id", "1337",
		"--builder-guarantee-timeout", "1200ms", "--builder-bundle-size", "8", "--builder-submit-backoff", "100ms", "--builder-submit-backoff-max", "1s")
	r.logf("ledgerq serve at %s: the batch, wallet and builder lanes on", r.api)
	if path := os.Getenv("LEDGERQ_FAILOVER_SERVE_LOG"); path != "" {
		// The whole log of `ledgerq serve`, kept for reading (a failed
		// test prints only its end).
		t.Cleanup(func() {
			_ = os.WriteFile(path, []byte(r.serve.Stdout.String()+r.serve.Stderr.String()), 0o644)
		})
	}

	r.db, _ = store.Open(context.Background(), r.f.URL())
	t.Cleanup(r.db.Close)
	return r
}

// failover kills the primary once the lanes have all moved since the last
// failover, waits for the secondary's promotion, and brings the killed node
// back as the new secondary.
func (r *run) failover(n int) {
	r.t.Helper()
	since := r.began
	if len(r.failovers) > 0 {
		since = r.failovers[len(r.failovers)-1].rejoined
	}
	r.awaitProgress(since, time.Minute)
	// The kill lands anywhere in the lanes' work.
	time.Sleep(time.Duration(300+rand.IntN(1500)) * time.Millisecond) // the randomness is the point
	primary, other := r.f.primary()
	ft := failoverTimes{node: primary.name, fenced: n%2 == 0, down: time.Now()}
	if ft.fenced {
		// Every other primary first turns read-only under ledgerq's open
		// connections, as a demoted primary that still answers does.
		r.f.fenceReadOnly(primary)
		ft.readOnly = time.Now()
		r.logf("failover %d: %s, the primary, refuses writes (default_transaction_read_only) for %s before it dies", n, primary.name, fenceFor)
		time.Sleep(fenceFor) // the read-only primary answering is the point
	}
	ft.killed = time.Now()
	r.f.kill(primary)
	if ft.fenced {
		r.f.unfence(primary)
	}
	r.logf("failover %d: SIGKILLed %s, the primary (pg_autoctl, postmaster, backends)", n, primary.name)
	ft.promoted = r.f.waitStates(time.Minute, other.name+" promoted", func(s map[string]nodeState) bool {
		st := s[other.name].reported
		return st == "wait_primary" || st == "primary"
	})
	r.logf("failover %d: %s takes writes %.1fs after the kill; restarting %s", n, other.name, ft.promoted.Sub(ft.killed).Seconds(), primary.name)
	r.f.restart(primary)
	ft.rejoined = r.f.waitStates(2*time.Minute, primary.name+" back as secondary", func(s map[string]nodeState) bool {
		return s[primary.name].reported == "secondary" && s[primary.name].goal == "secondary" &&
			s[other.name].reported == "primary" && s[other.name].goal == "primary"
	})
	r.logf("failover %d: %s is the synchronous secondary of %s, %.1fs after the kill", n, primary.name, other.name, ft.rejoined.Sub(ft.killed).Seconds())
	r.awaitSessions(n)
	r.failovers = append(r.failovers, ft)
	select {
	case <-r.serve.Done():
		r.t.Fatalf("ledgerq serve exited during failover %d", n)
	default:
	}
}

// awaitSessions waits until ledgerq's two connections outside its pool are
// back on the new primary: the LISTEN connection that wakes its loops, and
// the one that holds its liveness lock (without it, the wallet shards it
// claims are freed only by their lease).
func (r *run) awaitSessions(n int) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var listening, locks int
		err := r.db.Conns().QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()),
			(SELECT count(*) FROM ledgerq.liveness_locks)`).Scan(&listening, &locks)
		cancel()
		if err == nil && listening > 0 && locks > 0 {
			r.logf("failover %d: ledgerq's LISTEN connection and liveness lock are on the new primary", n)
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("failover %d: after 30s ledgerq has %d LISTEN sessions and %d liveness locks on the new primary (%v)", n, listening, locks, err)
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of this wait on the database
	}
}

// progress returns, per lane, the times of its steps forward after since,
// as ledgerq recorded them.
func (r *run) progress(since time.Time) (map[string][]time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string][]time.Time{}
	for lane, q := range progressSQL {
		rows, err := r.db.Conns().Query(ctx, q, since)
		if err != nil {
			return nil, err
		}
		ts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return nil, err
		}
		out[lane] = ts
	}
	return out, nil
}

// awaitProgress waits until every lane has moved after since.
func (r *run) awaitProgress(since time.Time, timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string][]time.Time
	var lastErr error
	for time.Now().Before(deadline) {
		p, err := r.progress(since)
		if err == nil && len(p[laneBatch]) > 0 && len(p[laneWallet]) > 0 && len(p[laneBuilder]) > 0 {
			return
		}
		last, lastErr = p, err
		time.Sleep(200 * time.Millisecond) // the poll interval of this wait on the database
	}
	r.t.Fatalf("not every lane moved within %s after +%.1fs: batches %d, tasks %d, bundles %d (%v)", timeout, since.Sub(r.began).Seconds(),
		len(last[laneBatch]), len(last[laneWallet]), len(last[laneBuilder]), lastErr)
}

// stopTimes returns, per lane and failover, how long the lane stood still
// — from its last step forward before the primary stopped taking writes to
// its first after the kill (a fenced primary takes none between the two) —
// and how long after the new primary took writes that first step came.
func (r *run) stopTimes() (stopped, resumed map[string][]time.Duration) {
	r.t.Helper()
	p, err := r.progress(r.began)
	require.NoError(r.t, err)
	stopped, resumed = map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, lane := range lanes {
		ts := p[lane]
		for n, ft := range r.failovers {
			if ft.fenced {
				// A read-only primary takes no step forward.
				from := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(ft.readOnly) })
				to := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(ft.killed) })
				if to > from {
					r.t.Errorf("failover %d: lane %s made %d steps forward while %s was read-only: the fence did not hold", n+1, lane, to-from, ft.node)
				}
			}
			i := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(ft.killed) })
			require.True(r.t, i > 0 && i < len(ts), "lane %s has steps on both sides of the kill at +%.1fs", lane, ft.killed.Sub(r.began).Seconds())
			stopped[lane] = append(stopped[lane], ts[i].Sub(ts[i-1]))
			resumed[lane] = append(resumed[lane], ts[i].Sub(ft.promoted))
		}
	}
	return stopped, resumed
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// awaitFinal waits until every accepted item is final in ledgerq: every
// batch committed, every task done or in error, every pool transaction in
// a finalized bundle.
func (r *run) awaitFinal(timeout time.Duration) {
	r.t.Helper()
	batches, tasks, txs := r.load.accepted()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var b, w, x int
		err := r.db.Conns().QueryRow(ctx, `SELECT
			(SELECT count(*) FROM ledgerq.batches b JOIN ledgerq.batch_payloads p USING (seq) WHERE p.id = ANY($1) AND b.status = 'committed'),
			(SELECT count(*) FROM ledgerq.wallet_tasks WHERE id = ANY($2) AND status IN (2, 3)),
			(SELECT count(*) FROM ledgerq.pool_txs t JOIN ledgerq.bundles b ON b.id = t.bundle_id
			  WHERE t.tx_hash = ANY($3) AND b.state = 'finalized')`,
			batchIDs(batches), taskIDs(tasks), txHashes(txs)).Scan(&b, &w, &x)
		cancel()
		if err == nil && b == len(batches) && w == len(tasks) && x == len(txs) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("not final within %s: %d/%d batches committed, %d/%d tasks ended, %d/%d transactions in finalized bundles (%v)",
				timeout, b, len(batches), w, len(tasks), x, len(txs), err)
		}
		time.Sleep(500 * time.Millisecond) // the poll interval of this wait on the database
	}
}
