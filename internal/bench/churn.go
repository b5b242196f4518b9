package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

// ChurnConfig is a churn run: a `ledgerq serve` process with every lane on,
// each lane's ledger a `ledgerq simledger` process of its own, and a steady
// load on all three lanes through serve's HTTP API from this process, while
// serve's resident memory is sampled.
type ChurnConfig struct {
	// DatabaseURL is a database of the run's own; serve migrates it.
	DatabaseURL string
	// Executable is the ledgerq binary that runs serve and the simulated
	// ledgers.
	Executable string
	// Duration is how long the load runs; Interval is the time between two
	// samples.
	Duration, Interval time.Duration
	// BatchRate, WalletRate and BuilderRate are the offered loads: batches
	// posted to /v1/batches, send-tx tasks posted to the wallets and
	// transactions sent to /rpc, each per second.
	BatchRate, WalletRate, BuilderRate float64
	// BatchesPerRequest is the batches in one POST /v1/batches; Services the
	// services they rotate over.
	BatchesPerRequest, Services int
	// Wallets is the number of wallets (keystores made for the run, funded
	// at the simulated EVM chain's genesis). The builder lane's senders are
	// the development mnemonic's 20 accounts the simulated JAM chain funds.
	Wallets int
	// BlockPeriod is the simulated EVM chain's; SlotLength the simulated JAM
	// chain's.
	BlockPeriod, SlotLength time.Duration
	// ServeArgs are added to serve's command line.
	ServeArgs []string
	// WorkDir holds the keystores and the processes' logs (serve.log,
	// simledger-*.log); empty: a temporary directory, removed at the end.
	WorkDir string
	// Progress receives a line per sample and the verdict's reasoning.
	Progress io.Writer
}

// DefaultChurnConfig is a moderate steady load: well below what each lane
// takes on two cores, so that the run measures memory, not back-pressure.
func DefaultChurnConfig() ChurnConfig {
	return ChurnConfig{
		Duration: 30 * time.Minute, Interval: time.Minute,
		BatchRate: 200, WalletRate: 20, BuilderRate: 20,
		BatchesPerRequest: 10, Services: 200, Wallets: 4,
		BlockPeriod: time.Second, SlotLength: time.Second,
		Progress: io.Discard,
	}
}

// Validate reports the first setting a churn run cannot use.
func (c *ChurnConfig) Validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("bench churn: --database-url (or DATABASE_URL) is required")
	case c.Duration <= 0 || c.Interval <= 0 || c.Interval > c.Duration:
		return errors.New("bench churn: --duration and --interval must be positive, --interval at most --duration")
	case c.BatchRate <= 0 || c.WalletRate <= 0 || c.BuilderRate <= 0:
		return errors.New("bench churn: every lane's rate must be positive")
	case c.BatchesPerRequest < 1 || c.Services < 1 || c.Wallets < 1:
		return errors.New("bench churn: --batches-per-request, --services and --wallets must be at least 1")
	case c.BlockPeriod <= 0 || c.SlotLength <= 0:
		return errors.New("bench churn: --block-period and --slot-length must be positive")
	}
	return nil
}

// ChurnSample is one reading: serve's resident memory and each lane's
// finished work, cumulative.
type ChurnSample struct {
	At time.Duration
	// RSS is serve's VmRSS in bytes.
	RSS int64
	// BatchesCommitted, TasksDone and TxsFinalized are the lanes' done
	// counts: committed batches, done send-tx tasks, pool transactions in a
	// finalized bundle.
	BatchesCommitted, TasksDone, TxsFinalized int64
	// Sent, by lane, what the load generator had had accepted by then.
	BatchesSent, TasksSent, TxsSent int64
	// Tables are the sizes in bytes of the ledgerq schema's tables, each
	// with its indexes and TOAST (pg_total_relation_size), by table name.
	Tables map[string]int64
}

// TablesBytes is the sum of the sample's table sizes.
func (s ChurnSample) TablesBytes() int64 {
	var n int64
	for _, b := range s.Tables {
		n += b
	}
	return n
}

// ChurnReport is a churn run's samples and verdict.
type ChurnReport struct {
	Config  ChurnConfig
	Samples []ChurnSample
	// Errors counts the requests the API refused or that failed, by lane.
	BatchErrors, TaskErrors, TxErrors int64
	// TxRetries counts the builder lane's back-pressure answers (a full
	// pool or sender), sent again later.
	TxRetries int64
	// FirstErrors holds the first error of each lane, for the report.
	FirstErrors []string
	// Baseline and End are the mean RSS of the samples in the window after
	// warm-up (minutes 5–10 of a 30-minute run: the sixth to the third of
	// the duration) and of the last third (minutes 20–30); Growth is
	// End/Baseline − 1.
	Baseline, End float64
	Growth        float64
	// TablesBaseline, TablesEnd and TablesGrowth are the same for the
	// schema's tables' total size; Table is each table's mean size in the
	// two windows, in bytes.
	TablesBaseline, TablesEnd float64
	TablesGrowth              float64
	Table                     map[string][2]float64
	// BaselineWindow and EndWindow are the windows' bounds.
	BaselineWindow, EndWindow [2]time.Duration
	ServePID                  int
}

// churnWindows are the two windows the verdict compares: after warm-up
// (the sixth to the third of the run) and the last third.
func churnWindows(d time.Duration) (base, end [2]time.Duration) {
	return [2]time.Duration{d / 6, d / 3}, [2]time.Duration{d - d/3, d}
}

// RunChurn starts the simulated ledgers and serve, loads every lane for
// cfg.Duration and samples serve every cfg.Interval. The report holds what
// was measured even when err is set.
func RunChurn(ctx context.Context, cfg ChurnConfig) (*ChurnReport, error) {
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Executable = exe
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "ledgerq-churn-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r := &churnRun{cfg: cfg, dir: dir}
	defer r.stop()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// churnRun is a churn run's processes and load.
type churnRun struct {
	cfg   ChurnConfig
	dir   string
	procs []*churnProc
	serve *churnProc
	api   string
	http  *http.Client
	eth   *ethclient.Client
	db    *pgx.Conn

	wallets    []string
	batchers   []*sawtooth.Signer
	accounts   []*churnAccount
	builderSig types.Signer

	batchesSent, tasksSent, txsSent     atomic.Int64
	batchErrs, taskErrs, txErrs, txBusy atomic.Int64
	errMu                               sync.Mutex
	firstErrs                           map[string]string
}

// churnAccount is one builder-lane sender and its next nonce; its mutex
// keeps its sends in nonce order.
type churnAccount struct {
	mu    sync.Mutex
	key   *ecdsa.PrivateKey
	nonce uint64
}

// churnProc is a child process and where its output goes.
type churnProc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// churnChainID is the chain id of both simulated chains (the simulated
// ledgers' default).
const churnChainID = 1337

func (r *churnRun) start(ctx context.Context) error {
	c := &r.cfg
	// The wallets: keystores with light scrypt, one passphrase.
	pass := "churn"
	passFile := filepath.Join(r.dir, "passphrase")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		return err
	}
	var walletFlags, alloc []string
	for i := range c.Wallets {
		addr, file, err := keystore.NewKeystore(filepath.Join(r.dir, "keystore"), pass, keystore.LightScrypt)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("churn%d", i)
		r.wallets = append(r.wallets, name)
		walletFlags = append(walletFlags, name+"="+file)
		alloc = append(alloc, common.Address(addr).Hex()+"=1000000000000000000000000")
	}
	for range c.Services {
		s, err := sawtooth.GenerateSigner()
		if err != nil {
			return err
		}
		r.batchers = append(r.batchers, s)
	}
	for _, a := range jam.DevAccounts() {
		r.accounts = append(r.accounts, &churnAccount{key: a.Key})
	}
	r.builderSig = types.LatestSignerForChainID(big.NewInt(churnChainID))

	sawURL, err := r.startSimLedger(ctx, "sawtooth", "--sim-commit-delay", "0", "--sim-max-events", "1000")
	if err != nil {
		return err
	}
	evmURL, err := r.startSimLedger(ctx, "evm", "--evm-block-period", c.BlockPeriod.String(), "--evm-alloc", strings.Join(alloc, ","))
	if err != nil {
		return err
	}
	jamURL, err := r.startSimLedger(ctx, "jam", "--jam-slot-length", c.SlotLength.String())
	if err != nil {
		return err
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"serve", "--database-url", c.DatabaseURL, "--api-addr", addr, "--api-insecure-open", "--log-level", "warn",
		"--batch-ledger", "sawtooth", "--batch-ledger-url", sawURL,
		"--wallet-keystore", strings.Join(walletFlags, ","), "--wallet-passphrase-file", passFile,
		"--wallet-ledger", "evm", "--wallet-ledger-url", evmURL,
		"--builder", "--builder-ledger", "jam", "--builder-ledger-url", jamURL, "--builder-chain-id", strconv.Itoa(churnChainID)}
	args = append(args, c.ServeArgs...)
	r.serve, err = r.startProc("serve", args...)
	if err != nil {
		return err
	}
	r.api = "http://" + addr
	r.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}
	if err := r.waitReady(ctx, r.serve, r.api+"/readyz", 2*time.Minute); err != nil {
		return err
	}
	r.eth, err = ethclient.DialContext(ctx, r.api+"/rpc")
	if err != nil {
		return err
	}
	r.db, err = pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connecting to read the lanes' counts: %w", err)
	}
	fmt.Fprintf(c.Progress, "churn: serve pid %d at %s (logs in %s); simulated ledgers: sawtooth %s, evm %s, jam %s\n",
		r.serve.cmd.Process.Pid, r.api, r.dir, sawURL, evmURL, jamURL)
	return nil
}

// startSimLedger starts `ledgerq simledger --kind kind` on a free port and
// returns its URL, read from the line it prints once it listens.
func (r *churnRun) startSimLedger(ctx context.Context, kind string, args ...string) (string, error) {
	cmd := exec.Command(r.cfg.Executable, append([]string{"simledger", "--kind", kind, "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	p, err := r.startCmd("simledger-"+kind, cmd)
	if err != nil {
		return "", err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return u, nil
	case <-p.done:
		return "", fmt.Errorf("simledger --kind %s exited: %s", kind, tailOf(p.log.Name()))
	case <-time.After(time.Minute):
		return "", fmt.Errorf("simledger --kind %s did not listen within a minute", kind)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (r *churnRun) startProc(name string, args ...string) (*churnProc, error) {
	return r.startCmd(name, exec.Command(r.cfg.Executable, args...))
}

// startCmd starts cmd with its stderr (and its stdout, unless already
// piped) in dir/name.log.
func (r *churnRun) startCmd(name string, cmd *exec.Cmd) (*churnProc, error) {
	f, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &churnProc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	return p, nil
}

// stop ends the load's clients and the processes: serve first (SIGTERM, so
// that it drains), then the ledgers.
func (r *churnRun) stop() {
	if r.db != nil {
		_ = r.db.Close(context.Background())
	}
	if r.eth != nil {
		r.eth.Close()
	}
	for i := len(r.procs) - 1; i >= 0; i-- {
		p := r.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.log.Close()
	}
}

func (r *churnRun) waitReady(ctx context.Context, p *churnProc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := r.http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.name, tailOf(p.log.Name()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // the readiness poll's pace
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s within %s", p.name, url, timeout)
		}
	}
}

func (r *churnRun) run(ctx context.Context) (*ChurnReport, error) {
	c := &r.cfg
	rep := &ChurnReport{Config: *c, ServePID: r.serve.cmd.Process.Pid}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	// One request in flight per lane's tick at most this many at once: the
	// load is offered at a fixed rate and a slow answer is not waited for.
	const inFlight = 32
	for _, lane := range []struct {
		rate float64
		send func(context.Context, int64)
	}{
		{c.BatchRate / float64(c.BatchesPerRequest), r.postBatches},
		{c.WalletRate, r.postTask},
		{c.BuilderRate, r.sendTx},
	} {
		wg.Go(func() { offer(loadCtx, lane.rate, inFlight, lane.send) })
	}

	var err error
	tick := time.NewTicker(c.Interval)
	end := time.NewTimer(c.Duration)
sampling:
	for {
		select {
		case <-tick.C:
			s, serr := r.sample(ctx, time.Since(start))
			if serr != nil {
				err = serr
				break sampling
			}
			rep.Samples = append(rep.Samples, s)
			fmt.Fprintf(c.Progress, "churn: %8s  rss %7.1f MiB  tables %7.1f MiB  batches committed %d (posted %d)  tasks done %d (posted %d)  txs finalized %d (sent %d)\n",
				s.At.Round(time.Second), mib(s.RSS), mib(s.TablesBytes()), s.BatchesCommitted, s.BatchesSent, s.TasksDone, s.TasksSent, s.TxsFinalized, s.TxsSent)
		case <-end.C:
			break sampling
		case <-r.serve.done:
			err = fmt.Errorf("serve exited during the run: %s", tailOf(r.serve.log.Name()))
			break sampling
		case <-ctx.Done():
			err = ctx.Err()
			break sampling
		}
	}
	tick.Stop()
	stopLoad()
	wg.Wait()
	// The last interval's sample, if the end came before its tick.
	if err == nil && (len(rep.Samples) == 0 || rep.Samples[len(rep.Samples)-1].At < c.Duration-c.Interval/2) {
		if s, serr := r.sample(ctx, time.Since(start)); serr == nil {
			rep.Samples = append(rep.Samples, s)
		}
	}
	rep.BatchErrors, rep.TaskErrors, rep.TxErrors, rep.TxRetries = r.batchErrs.Load(), r.taskErrs.Load(), r.txErrs.Load(), r.txBusy.Load()
	r.errMu.Lock()
	for _, lane := range []string{"batches", "tasks", "txs"} {
		if e, ok := r.firstErrs[lane]; ok {
			rep.FirstErrors = append(rep.FirstErrors, lane+": "+e)
		}
	}
	r.errMu.Unlock()
	rep.judge()
	return rep, err
}

// judge sets the verdict's windows, their mean RSS and the growth from the
// samples.
func (rep *ChurnReport) judge() {
	rep.BaselineWindow, rep.EndWindow = churnWindows(rep.Config.Duration)
	rss := func(s ChurnSample) float64 { return float64(s.RSS) }
	rep.Baseline, rep.End, rep.Growth = windowGrowth(rep.Samples, rep.BaselineWindow, rep.EndWindow, rss)
	total := func(s ChurnSample) float64 { return float64(s.TablesBytes()) }
	rep.TablesBaseline, rep.TablesEnd, rep.TablesGrowth = windowGrowth(rep.Samples, rep.BaselineWindow, rep.EndWindow, total)
	rep.Table = map[string][2]float64{}
	for _, s := range rep.Samples {
		for name := range s.Tables {
			if _, ok := rep.Table[name]; !ok {
				size := func(s ChurnSample) float64 { return float64(s.Tables[name]) }
				base, end, _ := windowGrowth(rep.Samples, rep.BaselineWindow, rep.EndWindow, size)
				rep.Table[name] = [2]float64{base, end}
			}
		}
	}
}

// windowGrowth is the mean of v over the samples in each window and the
// growth from the first to the second (0 when the first is 0).
func windowGrowth(samples []ChurnSample, base, end [2]time.Duration, v func(ChurnSample) float64) (b, e, growth float64) {
	b, e = windowMean(samples, base, v), windowMean(samples, end, v)
	if b > 0 {
		growth = e/b - 1
	}
	return b, e, growth
}

// offer calls send rate times a second, each call in a goroutine of its own,
// at most inFlight at once (past that a tick is skipped: the load generator
// does not queue behind a slow server), until ctx ends.
func offer(ctx context.Context, rate float64, inFlight int, send func(context.Context, int64)) {
	period := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(period)
	defer tick.Stop()
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := int64(0); ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			send(ctx, n)
		})
	}
}

func (r *churnRun) fail(ctx context.Context, lane string, counter *atomic.Int64, err error) {
	if ctx.Err() != nil {
		return // the run is ending; the request was cut, not refused
	}
	counter.Add(1)
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.firstErrs == nil {
		r.firstErrs = map[string]string{}
	}
	if _, ok := r.firstErrs[lane]; !ok {
		r.firstErrs[lane] = err.Error()
	}
}

// postBatches posts the n-th request: BatchesPerRequest batches, signed now,
// of consecutive services.
func (r *churnRun) postBatches(ctx context.Context, n int64) {
	c := &r.cfg
	in := make([]apigen.NewBatch, c.BatchesPerRequest)
	for j := range in {
		k := int(n)*c.BatchesPerRequest + j
		svc := k % c.Services
		id, payload, err := r.batchers[svc].NewBatch(fmt.Appendf(nil, "ledgerq churn batch %d", k))
		if err != nil {
			r.fail(ctx, "batches", &r.batchErrs, err)
			return
		}
		in[j] = apigen.NewBatch{ID: id, ServiceID: fmt.Sprintf("churn-s%d", svc), Payload: base64.StdEncoding.EncodeToString(payload)}
	}
	body, _ := json.Marshal(in) // plain structs: never fails
	if err := r.post(ctx, "/v1/batches", nil, body, http.StatusCreated, http.StatusOK); err != nil {
		r.fail(ctx, "batches", &r.batchErrs, err)
		return
	}
	r.batchesSent.Add(int64(len(in)))
}

// churnRecipient receives the wallet lane's and the builder lane's 1 wei.
var churnRecipient = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// postTask posts the n-th send-tx task, fire and forget, with an
// Idempotency-Key, to the wallets in turn.
func (r *churnRun) postTask(ctx context.Context, n int64) {
	w := r.wallets[int(n)%len(r.wallets)]
	hdr := http.Header{"Idempotency-Key": {fmt.Sprintf("churn-%d", n)}}
	body := []byte(`{"to":"` + churnRecipient.Hex() + `","value":"1"}`)
	if err := r.post(ctx, "/v1/wallets/"+w+"/send-tx?task=true", hdr, body, http.StatusAccepted, http.StatusOK); err != nil {
		r.fail(ctx, "tasks", &r.taskErrs, err)
		return
	}
	r.tasksSent.Add(1)
}

// sendTx sends the next transaction of the n-th account in turn with
// eth_sendRawTransaction. A full pool or sender is back-pressure: the nonce
// is sent again on the account's next turn.
func (r *churnRun) sendTx(ctx context.Context, n int64) {
	a := r.accounts[int(n)%len(r.accounts)]
	a.mu.Lock()
	defer a.mu.Unlock()
	tip := big.NewInt(2_000_000_000)
	tx, err := types.SignNewTx(a.key, r.builderSig, &types.DynamicFeeTx{
		ChainID: big.NewInt(churnChainID), Nonce: a.nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Mul(tip, big.NewInt(25)),
		Gas: 21_000, To: &churnRecipient, Value: big.NewInt(1),
	})
	if err != nil {
		r.fail(ctx, "txs", &r.txErrs, err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = r.eth.SendTransaction(cctx, tx)
	switch {
	case err == nil, strings.HasPrefix(err.Error(), "already known"):
		a.nonce++
		r.txsSent.Add(1)
	case strings.HasPrefix(err.Error(), "txpool is full"), strings.HasPrefix(err.Error(), "account limit exceeded"):
		r.txBusy.Add(1)
	default:
		r.fail(ctx, "txs", &r.txErrs, fmt.Errorf("nonce %d of %s: %w", a.nonce, crypto.PubkeyToAddress(a.key.PublicKey).Hex(), err))
	}
}

func (r *churnRun) post(ctx context.Context, path string, hdr http.Header, body []byte, ok ...int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.api+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	for _, code := range ok {
		if resp.StatusCode == code {
			return nil
		}
	}
	return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(answer[:min(len(answer), 300)]))
}

// sample reads serve's VmRSS and the lanes' done counts.
func (r *churnRun) sample(ctx context.Context, at time.Duration) (ChurnSample, error) {
	s := ChurnSample{At: at, BatchesSent: r.batchesSent.Load(), TasksSent: r.tasksSent.Load(), TxsSent: r.txsSent.Load()}
	rss, err := ReadRSS(r.serve.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	s.RSS = rss
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = r.db.QueryRow(qctx, `SELECT
		(SELECT count(*) FROM ledgerq.batches WHERE status = 'committed'),
		(SELECT count(*) FROM ledgerq.wallet_tasks WHERE status = 3),
		(SELECT count(*) FROM ledgerq.pool_txs t JOIN ledgerq.bundles b ON b.id = t.bundle_id WHERE b.state = 'finalized')`).
		Scan(&s.BatchesCommitted, &s.TasksDone, &s.TxsFinalized)
	if err != nil {
		return s, fmt.Errorf("counting the lanes' finished work: %w", err)
	}
	rows, err := r.db.Query(qctx, `SELECT c.relname, pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'ledgerq' AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return s, fmt.Errorf("reading the tables' sizes: %w", err)
	}
	s.Tables = map[string]int64{}
	var name string
	var size int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &size}, func() error { s.Tables[name] = size; return nil }); err != nil {
		return s, fmt.Errorf("reading the tables' sizes: %w", err)
	}
	return s, nil
}

// ReadRSS returns a process's resident set size in bytes, from the VmRSS
// line of /proc/PID/status.
func ReadRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading serve's memory: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "123456 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb * 1024, nil
				}
			}
			return 0, fmt.Errorf("/proc/%d/status: unreadable VmRSS line %q", pid, strings.TrimSpace(line))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS line", pid)
}

// windowMean is the mean of v over the samples taken within w (bounds
// included).
func windowMean(samples []ChurnSample, w [2]time.Duration, v func(ChurnSample) float64) float64 {
	var sum float64
	n := 0
	for _, s := range samples {
		if s.At >= w[0]-time.Second && s.At <= w[1]+time.Second {
			sum += v(s)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// WriteSummary prints the run's totals and the verdict on serve's memory.
func (rep *ChurnReport) WriteSummary(w io.Writer) error {
	c := rep.Config
	var last ChurnSample
	if len(rep.Samples) > 0 {
		last = rep.Samples[len(rep.Samples)-1]
	}
	bw := &errWriter{w: w}
	bw.printf("churn: %s under load, samples every %s, serve pid %d\n", c.Duration, c.Interval, rep.ServePID)
	bw.printf("churn: offered %g batches/s (%d per POST /v1/batches, %d services), %g send-tx/s (%d wallets), %g eth_sendRawTransaction/s (20 senders)\n",
		c.BatchRate, c.BatchesPerRequest, c.Services, c.WalletRate, c.Wallets, c.BuilderRate)
	bw.printf("churn: done: batches committed %d of %d posted; tasks done %d of %d posted; txs finalized %d of %d sent (%d retried on a full pool or sender)\n",
		last.BatchesCommitted, last.BatchesSent, last.TasksDone, last.TasksSent, last.TxsFinalized, last.TxsSent, rep.TxRetries)
	bw.printf("churn: errors: batches %d, tasks %d, txs %d\n", rep.BatchErrors, rep.TaskErrors, rep.TxErrors)
	for _, e := range rep.FirstErrors {
		bw.printf("churn: first error of %s\n", e)
	}
	if rep.Baseline == 0 || rep.End == 0 {
		bw.printf("churn: verdict: n/a (no samples in one of the windows %s–%s and %s–%s)\n",
			rep.BaselineWindow[0], rep.BaselineWindow[1], rep.EndWindow[0], rep.EndWindow[1])
		return bw.err
	}
	sec := func(d time.Duration) time.Duration { return d.Round(time.Second) }
	bw.printf("churn: verdict: rss %+.1f%% (mean %.1f MiB over %s–%s, %.1f MiB over %s–%s)\n",
		100*rep.Growth, rep.Baseline/(1<<20), sec(rep.BaselineWindow[0]), sec(rep.BaselineWindow[1]),
		rep.End/(1<<20), sec(rep.EndWindow[0]), sec(rep.EndWindow[1]))
	if rep.TablesBaseline > 0 {
		bw.printf("churn: verdict: tables %+.1f%% (mean %.1f MiB over %s–%s, %.1f MiB over %s–%s)%s\n",
			100*rep.TablesGrowth, rep.TablesBaseline/(1<<20), sec(rep.BaselineWindow[0]), sec(rep.BaselineWindow[1]),
			rep.TablesEnd/(1<<20), sec(rep.EndWindow[0]), sec(rep.EndWindow[1]), rep.growingMost(3))
	}
	return bw.err
}

// growingMost names the n tables that grew most in bytes between the
// windows (a table of a few pages can grow by a large share and nothing
// that matters), for the verdict's line.
func (rep *ChurnReport) growingMost(n int) string {
	grew := func(name string) float64 { return rep.Table[name][1] - rep.Table[name][0] }
	var names []string
	for name := range rep.Table {
		if grew(name) > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(grew(b), grew(a)), strings.Compare(a, b)) })
	if len(names) > n {
		names = names[:n]
	}
	parts := make([]string, len(names))
	for i, name := range names {
		w := rep.Table[name]
		if w[0] > 0 {
			parts[i] = fmt.Sprintf("%s %+.1f MiB (%+.0f%%)", name, grew(name)/(1<<20), 100*(w[1]/w[0]-1))
		} else {
			parts[i] = fmt.Sprintf("%s %+.1f MiB", name, grew(name)/(1<<20))
		}
	}
	if len(parts) == 0 {
		return "; no table grew"
	}
	return "; growing most: " + strings.Join(parts, ", ")
}

// errWriter keeps the first write error of a run of prints.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tailOf returns the end of a log file, for an error message.
func tailOf(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	b = b[max(0, len(b)-2000):]
	return strings.TrimSpace(string(b))
}
