package bench

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
)

// ErrBuilderCheck is wrapped by RunBuilder's error when a transaction was
// not executed exactly once, in nonce order, or a bundle did not finalize.
var ErrBuilderCheck = errors.New("builder bench check failed")

// BuilderConfig configures a builder-lane run.
type BuilderConfig struct {
	// Node is the ledgerq process under test; its builder lane is enabled
	// and given the simulated JAM chain by the run, and its API served on a
	// loopback listener.
	Node node.Config
	// Senders each send TxsPerSender transactions, nonces 0.., through
	// POST /rpc with go-ethereum's ethclient; Clients of them at once.
	Senders      int
	TxsPerSender int
	Clients      int
	// Chain is the simulated JAM chain (its clock is set by the run).
	Chain jam.Config
	// Grace is how long, after the last transaction is accepted, every
	// transaction may take to reach a finalized bundle.
	Grace            time.Duration
	ProgressInterval time.Duration
	Progress         io.Writer
	// Baseline, when BaselineGeth, first sends the same transactions the
	// same way to a geth --dev started for the run (Geth is its binary: empty
	// is $LEDGERQ_TEST_GETH, else geth on PATH) and reports both.
	Baseline string
	Geth     string
	// BacklogFinished seeds this many finished pool transactions (included
	// in finalized bundles of BundleSize) before the run, as a long-running
	// lane leaves them behind.
	BacklogFinished int
	// OnStart, when set, is called as the clients start sending (a CPU
	// profile starts there).
	OnStart func() error
}

// DefaultBuilderConfig returns a run of 20 senders × 50 transactions on a
// chain with 500 ms slots.
func DefaultBuilderConfig() BuilderConfig {
	nc := node.Defaults()
	nc.Loops.PollInterval = 100 * time.Millisecond
	nc.Builder.Enabled = true
	nc.Builder.GuaranteeTimeout = 1500 * time.Millisecond
	return BuilderConfig{
		Node: nc, Senders: 20, TxsPerSender: 50, Clients: 20,
		Chain: jam.Config{SlotLength: 500 * time.Millisecond, Cores: jam.DefaultCores, LateSlots: jam.DefaultLateSlots, Seed: 1},
		Grace: 2 * time.Minute, ProgressInterval: time.Second,
	}
}

// Validate reports a configuration that cannot run.
func (c *BuilderConfig) Validate() error {
	switch {
	case c.Senders < 1 || c.TxsPerSender < 1 || c.Clients < 1:
		return errors.New("--senders, --txs-per-sender and --clients must be at least 1")
	case c.Chain.SlotLength <= 0:
		return errors.New("--slot-length must be positive")
	case c.Grace <= 0 || c.ProgressInterval <= 0:
		return errors.New("--grace and --progress-interval must be positive")
	case c.Baseline != "" && c.Baseline != BaselineGeth:
		return fmt.Errorf("--baseline %q: want geth or nothing", c.Baseline)
	case c.BacklogFinished < 0:
		return errors.New("--backlog-finished must not be negative")
	}
	return nil
}

// BuilderReport is a builder-lane run's outcome.
type BuilderReport struct {
	Senders, TxsPerSender int
	SlotLength            time.Duration
	// Accepted transactions, and the client's retries after a full pool or
	// sender (the pool's back-pressure); Refused ones ended in another error.
	Accepted, Retries, Refused int64
	// SendTime is from the first send to the last acceptance; Wall to the
	// last finalized bundle (or the end of the grace period).
	SendTime, Wall time.Duration
	// Bundles finalized, with their transactions, and how many versions
	// were submitted in all (a requeue is a version more).
	Bundles, FinalizedTxs, Versions int64
	// Submit→finalized per bundle (first version's submit), and a
	// transaction's received→finalized.
	BundleP50, BundleP99, TxP50, TxP99 time.Duration
	// The chain's own counts: executions, refused second executions of a
	// block number, nonce gaps.
	Chain    jam.Stats
	TimedOut bool
	Problems []string
	// Geth is the baseline's outcome (Baseline geth).
	Geth *GethReport
	// Windows are the submission windows that opened while at least a
	// bundle's worth of accepted transactions waited for a core; Submitted
	// the versions submitted in them; IdleCoreWindows = Windows × Cores −
	// Submitted (a core a window could have used and did not).
	Windows, Submitted, IdleCoreWindows, Cores int
	// Seeded finished transactions (BacklogFinished) and the time it took.
	Seeded   int
	SeedTime time.Duration
	// ProgressQueries are the progress lines' reads of the finalized count
	// (the bench's own load on the database).
	ProgressQueries int
}

// RunBuilder runs the workload and reports.
func RunBuilder(ctx context.Context, cfg BuilderConfig) (*BuilderReport, error) {
	prepare(&cfg.Progress, &cfg.Node)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, txs, err := signBuilderTxs(cfg)
	if err != nil {
		return nil, err
	}
	var geth *GethReport
	if cfg.Baseline == BaselineGeth {
		addrs := make([]common.Address, len(keys))
		for i, k := range keys {
			addrs[i] = crypto.PubkeyToAddress(k.PublicKey)
		}
		if geth, err = runGethBaseline(ctx, cfg, addrs, txs); err != nil {
			return nil, err
		}
	}
	// The senders are funded on the chain's EVM, which runs every
	// transaction.
	cfg.Chain.Clock = clock.Real{}
	cfg.Chain.ChainID = cfg.Node.Builder.Pool.ChainID
	cfg.Chain.Alloc = maps.Clone(cfg.Chain.Alloc)
	if cfg.Chain.Alloc == nil {
		cfg.Chain.Alloc = map[common.Address]*big.Int{}
	}
	for _, k := range keys {
		cfg.Chain.Alloc[crypto.PubkeyToAddress(k.PublicKey)] = new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))
	}
	chain, err := jam.Open(cfg.Chain)
	if err != nil {
		return nil, err
	}
	defer chain.Close()
	cfg.Node.Builder.Enabled = true
	cfg.Node.Builder.Ledger.Instance = chain
	n, err := node.Open(ctx, cfg.Node)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	var seedTime time.Duration
	if cfg.BacklogFinished > 0 {
		fmt.Fprintf(cfg.Progress, "bench: seeding %d finished pool transactions\n", cfg.BacklogFinished)
		began := time.Now()
		if err := seedFinished(ctx, n.Store(), cfg.Node.Builder.Pool.ChainID, cfg.BacklogFinished, cfg.Node.Builder.BundleSize, began); err != nil {
			return nil, err
		}
		seedTime = time.Since(began)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	stop := sync.OnceFunc(n.Stop)
	defer stop()
	cl, err := dialClients(ctx, "http://"+ln.Addr().String()+"/rpc", cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	r := &builderRun{cfg: cfg, chain: chain, st: n.Store(), client: cl, keys: keys, txs: txs}
	rep, err := r.run(ctx, stop)
	if rep != nil {
		rep.Geth = geth
		rep.Seeded, rep.SeedTime = cfg.BacklogFinished, seedTime
	}
	return rep, err
}

type builderRun struct {
	cfg    BuilderConfig
	chain  *jam.Chain
	st     *store.Store
	client *ethclient.Client
	keys   []*ecdsa.PrivateKey
	txs    [][]*types.Transaction // per sender, in nonce order

	sent sendCounts
}

// signBuilderTxs makes the senders' keys and signs every transaction before
// the clock starts.
func signBuilderTxs(c BuilderConfig) ([]*ecdsa.PrivateKey, [][]*types.Transaction, error) {
	chainID := big.NewInt(c.Node.Builder.Pool.ChainID)
	signer := types.LatestSignerForChainID(chainID)
	keys := make([]*ecdsa.PrivateKey, c.Senders)
	txs := make([][]*types.Transaction, c.Senders)
	for i := range keys {
		key, err := crypto.GenerateKey()
		if err != nil {
			return nil, nil, err
		}
		keys[i] = key
		for nonce := range c.TxsPerSender {
			tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{
				ChainID: chainID, Nonce: uint64(nonce), GasTipCap: new(big.Int).Set(c.Node.Builder.Pool.MinTip),
				GasFeeCap: new(big.Int).Mul(c.Node.Builder.Pool.MinTip, big.NewInt(2)), Gas: 21_000, To: &benchRecipient, Value: big.NewInt(1),
			})
			if err != nil {
				return nil, nil, err
			}
			txs[i] = append(txs[i], tx)
		}
	}
	return keys, txs, nil
}

func (r *builderRun) run(ctx context.Context, stopNode func()) (*BuilderReport, error) {
	c := &r.cfg
	rep := &BuilderReport{Senders: c.Senders, TxsPerSender: c.TxsPerSender, SlotLength: c.Chain.SlotLength}
	if c.OnStart != nil {
		if err := c.OnStart(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	in := startIngestion(func() error { return sendInNonceOrder(ctx, r.client, r.txs, c.Clients, &r.sent) })
	total := int64(c.Senders * c.TxsPerSender)
	tick := time.NewTicker(c.ProgressInterval)
	defer tick.Stop()
	var (
		lines int
		fin   int64
	)
	interrupted, timedOut := in.await(ctx, tick.C, c.Grace, func(sendOver bool) bool {
		// While the clients send, every progressReadEvery-th line reads the
		// count; after, every line does (it ends the wait).
		if sendOver || lines%progressReadEvery == 0 {
			n, err := r.finalizedTxs(ctx)
			rep.ProgressQueries++
			if err != nil {
				fmt.Fprintf(c.Progress, "bench: counting finalized transactions: %v\n", err)
				return false
			}
			fin = n
		}
		lines++
		st := r.chain.Stats()
		fmt.Fprintf(c.Progress, "bench: %6.1fs  accepted %d/%d  retries %d  finalized %d  chain: slot %d executed %d held %d duplicates %d\n",
			time.Since(start).Seconds(), r.sent.accepted.Load(), total, r.sent.retries.Load(), fin, st.Head, st.Executed, st.Held, st.Duplicates)
		return sendOver && fin >= r.sent.accepted.Load()
	})
	stopNode()
	rep.Wall = time.Since(start)
	rep.SendTime = in.end.Sub(start)
	rep.TimedOut = timedOut
	rep.Accepted, rep.Retries, rep.Refused = r.sent.accepted.Load(), r.sent.retries.Load(), r.sent.refused.Load()
	if interrupted {
		return rep, ctx.Err()
	}
	if err := summarizeAfter(ctx, time.Minute, rep, r.summarize); err != nil {
		return rep, errors.Join(in.err, err)
	}
	return rep, in.verdict(rep.Problems, ErrBuilderCheck)
}

// sendCounts counts a sending run's answers.
type sendCounts struct {
	accepted, retries, refused atomic.Int64
}

// sendInNonceOrder sends every sender's transactions in nonce order, clients
// senders at a time. A full pool or sender is back-pressure: the client
// waits and sends the same transaction again.
func sendInNonceOrder(ctx context.Context, cl *ethclient.Client, txs [][]*types.Transaction, clients int, n *sendCounts) error {
	sem := make(chan struct{}, clients)
	var wg sync.WaitGroup
	errc := make(chan error, len(txs))
	for _, mine := range txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			for _, tx := range mine {
				if err := sendOne(ctx, cl, tx, n); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func sendOne(ctx context.Context, cl *ethclient.Client, tx *types.Transaction, n *sendCounts) error {
	for {
		err := cl.SendTransaction(ctx, tx)
		switch {
		case err == nil:
			n.accepted.Add(1)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case retryable(err):
			n.retries.Add(1)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			n.refused.Add(1)
			return fmt.Errorf("sending %s: %w", tx.Hash().Hex(), err)
		}
	}
}

// senders returns the run's senders, lower-case hex.
func (r *builderRun) senders() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = strings.ToLower(crypto.PubkeyToAddress(k.PublicKey).Hex())
	}
	return out
}

// finalizedTxs counts the run's transactions whose bundle is finalized.
func (r *builderRun) finalizedTxs(ctx context.Context) (int64, error) {
	var n int64
	err := r.st.Conns().QueryRow(ctx, `
		SELECT count(*) FROM ledgerq.pool_txs t JOIN ledgerq.bundles b ON b.id = t.bundle_id
		WHERE t.chain_id = $1 AND t.sender = ANY($2) AND t.state = 'included' AND b.state = 'finalized'`,
		r.cfg.Node.Builder.Pool.ChainID, r.senders()).Scan(&n)
	return n, err
}

// summarize reads the figures from the database and checks the chain's
// execution log: every accepted transaction executed once, in nonce order
// per sender, no block number twice.
func (r *builderRun) summarize(ctx context.Context, rep *BuilderReport) error {
	chainID, senders := r.cfg.Node.Builder.Pool.ChainID, r.senders()
	if err := r.st.Conns().QueryRow(ctx, `
		SELECT count(DISTINCT b.id), count(*),
		       coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.finished - t.received_at)), 0)::float8,
		       coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM t.finished - t.received_at)), 0)::float8
		FROM (SELECT t.received_at, b.finalized_at AS finished, b.id
		      FROM ledgerq.pool_txs t JOIN ledgerq.bundles b ON b.id = t.bundle_id
		      WHERE t.chain_id = $1 AND t.sender = ANY($2) AND t.state = 'included' AND b.state = 'finalized') t
		JOIN ledgerq.bundles b ON b.id = t.id`, chainID, senders).
		Scan(&rep.Bundles, &rep.FinalizedTxs, seconds(&rep.TxP50), seconds(&rep.TxP99)); err != nil {
		return fmt.Errorf("reading the finalized transactions: %w", err)
	}
	if err := r.st.Conns().QueryRow(ctx, `
		SELECT coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY d), 0)::float8,
		       coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY d), 0)::float8,
		       coalesce(sum(versions), 0)
		FROM (SELECT extract(epoch FROM b.finalized_at - min(v.submitted_at)) AS d, count(v.*) AS versions
		      FROM ledgerq.bundles b JOIN ledgerq.bundle_versions v ON v.bundle_id = b.id
		      WHERE b.chain_id = $1 AND b.state = 'finalized'
		        AND EXISTS (SELECT 1 FROM ledgerq.pool_txs t WHERE t.bundle_id = b.id AND t.chain_id = $1 AND t.sender = ANY($2))
		      GROUP BY b.id) x`, chainID, senders).
		Scan(seconds(&rep.BundleP50), seconds(&rep.BundleP99), &rep.Versions); err != nil {
		return fmt.Errorf("reading the finalized bundles: %w", err)
	}
	if err := r.coreWindows(ctx, rep); err != nil {
		return err
	}
	rep.Chain = r.chain.Stats()
	executed := map[string]int{}
	skipped := 0
	for _, e := range r.chain.Executions() {
		for _, h := range e.TxHashes {
			executed[h]++
		}
		// A transaction the EVM refused is in its package but did not run.
		for _, sk := range e.Skipped {
			executed[sk.Hash]--
			skipped++
		}
	}
	if skipped > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the chain's EVM refused %d bundled transactions", skipped))
	}
	var missing, twice int
	for _, txs := range r.txs {
		for _, tx := range txs {
			switch executed[strings.ToLower(tx.Hash().Hex())] {
			case 0:
				missing++
			case 1:
			default:
				twice++
			}
		}
	}
	if missing > 0 && rep.Accepted == int64(len(r.txs)*r.cfg.TxsPerSender) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d accepted transactions were never executed", missing))
	}
	if twice > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d transactions were executed more than once", twice))
	}
	if rep.Chain.NonceGaps > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the chain executed %d transactions out of nonce order", rep.Chain.NonceGaps))
	}
	if rep.TimedOut {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d of %d accepted transactions were not finalized within the grace period", rep.Accepted-rep.FinalizedTxs, rep.Accepted))
	}
	return nil
}

// coreWindows counts the submission windows that opened while at least a
// bundle's worth of the run's accepted transactions waited for a core (not
// yet in a bundle with a version submitted before the window opened), the
// versions submitted in them, and the core-windows left idle: a window's
// cores less the versions submitted in it.
func (r *builderRun) coreWindows(ctx context.Context, rep *BuilderReport) error {
	b := r.cfg.Node.Builder
	rows, err := r.st.Conns().Query(ctx, `
		SELECT t.received_at, (SELECT min(v.submitted_at) FROM ledgerq.bundle_versions v WHERE v.bundle_id = t.bundle_id)
		FROM ledgerq.pool_txs t WHERE t.chain_id = $1 AND t.sender = ANY($2) AND t.state IN ('pending', 'queued', 'included')`, b.Pool.ChainID, r.senders())
	if err != nil {
		return fmt.Errorf("reading the transactions' submissions: %w", err)
	}
	type waiting struct {
		received time.Time
		sent     *time.Time
	}
	txs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (waiting, error) {
		var w waiting
		return w, row.Scan(&w.received, &w.sent)
	})
	if err != nil {
		return fmt.Errorf("reading the transactions' submissions: %w", err)
	}
	rows, err = r.st.Conns().Query(ctx, `
		SELECT v.submitted_at FROM ledgerq.bundle_versions v JOIN ledgerq.bundles b ON b.id = v.bundle_id
		WHERE b.chain_id = $1 ORDER BY v.submitted_at`, b.Pool.ChainID)
	if err != nil {
		return fmt.Errorf("reading the submitted versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil || len(txs) == 0 || len(versions) == 0 {
		return err
	}
	info, err := r.chain.Info(ctx)
	if err != nil {
		return err
	}
	open, close := cmp.Or(b.WindowOpen, info.SlotLength/2), cmp.Or(b.WindowClose, info.SlotLength/6)
	first := txs[0].received
	for _, t := range txs {
		if t.received.Before(first) {
			first = t.received
		}
	}
	rep.Cores = b.Cores
	for s := info.Slot(first) + 1; ; s++ {
		from, to := info.SlotStart(s).Add(-open), info.SlotStart(s).Add(-close)
		if from.After(versions[len(versions)-1]) {
			break
		}
		backlog := 0
		for _, t := range txs {
			if t.received.Before(from) && (t.sent == nil || !t.sent.Before(from)) {
				backlog++
			}
		}
		if backlog < b.BundleSize {
			continue
		}
		in := 0
		for _, v := range versions {
			if !v.Before(from) && v.Before(to) {
				in++
			}
		}
		in = min(in, b.Cores)
		rep.Windows++
		rep.Submitted += in
		rep.IdleCoreWindows += b.Cores - in
	}
	return nil
}

// secondsScanner scans float8 seconds into a Duration.
type secondsScanner struct{ d *time.Duration }

func seconds(d *time.Duration) secondsScanner { return secondsScanner{d} }

func (s secondsScanner) Scan(src any) error {
	f, ok := src.(float64)
	if !ok {
		return fmt.Errorf("want float8 seconds, got %T", src)
	}
	*s.d = time.Duration(f * float64(time.Second))
	return nil
}

// WriteSummary writes the report for people.
func (rep *BuilderReport) WriteSummary(w io.Writer) error {
	secs := func(d time.Duration) float64 { return max(d.Seconds(), 1e-9) }
	_, err := fmt.Fprintf(w, `builder lane: %d senders x %d transactions through POST /rpc (ethclient), simulated JAM chain, %s slots
  accepted:   %d transactions in %s = %.0f tx/s (client retries after a full pool or sender: %d; refused: %d)
  finalized:  %d bundles with %d transactions in %s = %.2f bundles/s, %.0f tx/s
  versions:   %d submitted for %d bundles
  latency:    bundle submit->finalized p50 %s p99 %s; transaction received->finalized p50 %s p99 %s
  cores:      %d submission windows opened with at least a bundle's worth waiting: %d of their %d core-windows used, %d idle
  chain:      executed %d blocks, refused %d second executions, %d parent mismatches, %d nonce gaps, faults %+v
`,
		rep.Senders, rep.TxsPerSender, rep.SlotLength,
		rep.Accepted, round(rep.SendTime), float64(rep.Accepted)/secs(rep.SendTime), rep.Retries, rep.Refused,
		rep.Bundles, rep.FinalizedTxs, round(rep.Wall), float64(rep.Bundles)/secs(rep.Wall), float64(rep.FinalizedTxs)/secs(rep.Wall),
		rep.Versions, rep.Bundles,
		round(rep.BundleP50), round(rep.BundleP99), round(rep.TxP50), round(rep.TxP99),
		rep.Windows, rep.Submitted, rep.Windows*rep.Cores, rep.IdleCoreWindows,
		rep.Chain.Executed, rep.Chain.Duplicates, rep.Chain.ParentMismatches, rep.Chain.NonceGaps, rep.Chain.Faults)
	if err != nil {
		return err
	}
	if rep.Seeded > 0 {
		if _, err := fmt.Fprintf(w, "  backlog:    %d finished pool transactions seeded before the run (in %s)\n", rep.Seeded, round(rep.SeedTime)); err != nil {
			return err
		}
	}
	if g := rep.Geth; g != nil {
		ours, theirs := float64(rep.Accepted)/secs(rep.SendTime), float64(g.Accepted)/secs(g.SendTime)
		if _, err := fmt.Fprintf(w, "  geth:       %s --dev, the same transactions and clients to its eth_sendRawTransaction: %d accepted in %s = %.0f tx/s (retries %d; refused %d)\n  ratio:      ledgerq /rpc %.0f tx/s / geth %.0f tx/s = %.2f\n",
			g.Version, g.Accepted, round(g.SendTime), theirs, g.Retries, g.Refused, ours, theirs, ours/max(theirs, 1e-9)); err != nil {
			return err
		}
	}
	for _, p := range rep.Problems {
		if _, err := fmt.Fprintf(w, "  PROBLEM:    %s\n", p); err != nil {
			return err
		}
	}
	return err
}
