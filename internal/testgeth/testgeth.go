package testgeth

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

// EnvBinary names the environment variable holding the geth binary's path.
const EnvBinary = "LEDGERQ_TEST_GETH"

// InstallCommand installs the geth the tests are written against.
const InstallCommand = "go install github.com/ethereum/go-ethereum/cmd/geth@v1.17.8"

// DevChainID is the chain id of `geth --dev`.
const DevChainID = 1337

// StallingMinerGasPrice is the least tip a Stalling node mines: 5 gwei. Its
// pool still takes a transaction with a 1 gwei tip, which then stays pending
// until it is replaced with a higher tip: the stall the wallet lane's gas
// bump tests need.
var StallingMinerGasPrice = big.NewInt(5_000_000_000)

const (
	// readyTimeout bounds how long a starting node may take to answer. It is
	// 2–6 s on an idle machine; CI's machines are shared.
	readyTimeout = 60 * time.Second
	// minedTimeout bounds WaitMined: a block comes every second.
	minedTimeout = 60 * time.Second
	callTimeout  = 10 * time.Second
	pollInterval = 100 * time.Millisecond
	// portAttempts: a free port found by listening and closing can be taken
	// by another process before geth binds it; then geth exits and Start
	// tries new ports.
	portAttempts = 3
)

// Option changes how Start runs the node.
type Option func(*options)

type options struct {
	minerGasPrice *big.Int
	crashable     bool
	chainID       int64
}

// Stalling runs the node with --miner.gasprice 5000000000: it accepts
// transactions with a lower tip but never mines them, so a sender can be
// made to wait on a nonce and bump it. Fund still works (it pays 5 gwei).
func Stalling() Option {
	return func(o *options) { o.minerGasPrice = StallingMinerGasPrice }
}

// ChainID runs the node on a chain with this id instead of DevChainID, so
// that several nodes are several chains (a wallet lane over many chains).
// geth --dev always makes a fresh data directory's chain with id 1337, but
// it keeps a data directory's stored genesis: Start first makes the
// developer account (an empty passphrase, which --dev unlocks), writes
// --dev's own genesis with the chain id replaced and that account funded,
// and runs `geth init` on it.
func ChainID(id int64) Option {
	return func(o *options) { o.chainID = id }
}

// Node is a running `geth --dev --dev.period 1`.
type Node struct {
	// URL is the HTTP JSON-RPC endpoint, http://127.0.0.1:<port>.
	URL string
	// ChainID is DevChainID, or the ChainID option's.
	ChainID *big.Int
	// Dev is the developer account: unlocked in the node, funded with more
	// ether than any test needs; Fund sends from it.
	Dev common.Address
	// Version is what `geth version` says, e.g. 1.17.8-stable.
	Version string
	// Binary is the path of the geth that runs.
	Binary string

	minerGasPrice *big.Int // nil: the dev default (1 wei)
	crashable     bool
	rpc           *rpc.Client
	ec            *ethclient.Client
	stopOnce      sync.Once

	dir      string // the data directory and logs
	httpPort int    // the same for every process, so URL stays valid

	mu      sync.Mutex
	proc    *process // the geth process running now, or the last one
	runs    int      // geth processes started
	stopped bool
}

// process is one run of geth.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been reaped
	logPath string
	began   time.Time
	ready   time.Duration  // from began until it answered
	dev     common.Address // its eth_accounts[0]
}

// current is the geth process running now, or the last one.
func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Start runs a geth --dev node for t and returns once it answers JSON-RPC.
// The node is killed when t ends (Stop). Without a geth binary t is skipped,
// or fails under CI=true.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, version := Binary(t)
	// Made before Stop is registered, so it is removed after the process
	// that writes into it is dead (cleanups run last-in first-out).
	dir := t.TempDir()
	var lastErr error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		n, err := launch(t, bin, version, filepath.Join(dir, fmt.Sprintf("run%d", attempt)), o)
		if err == nil {
			if o.crashable {
				// A crash before any clean shutdown would leave geth
				// unable to mine (see Crashable).
				n.WaitHead(t, 1)
				n.Checkpoint(t)
			}
			return n
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("testgeth: starting geth %s: %v", version, lastErr)
	return nil
}

var errPortTaken = errors.New("a port was taken before geth bound it")

func launch(t testing.TB, bin, version, dir string, o options) (*Node, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	httpPort, err := testnode.FreePort()
	if err != nil {
		return nil, err
	}
	chainID := int64(DevChainID)
	if o.chainID != 0 {
		chainID = o.chainID
		if err := initChain(bin, dir, chainID); err != nil {
			return nil, err
		}
	}
	n := &Node{
		URL:           fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		ChainID:       big.NewInt(chainID),
		Version:       version,
		Binary:        bin,
		minerGasPrice: o.minerGasPrice,
		crashable:     o.crashable,
		dir:           dir,
		httpPort:      httpPort,
	}
	rc, err := rpc.Dial(n.URL) // HTTP: connects on the first call
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", n.URL, err)
	}
	n.rpc = rc
	n.ec = ethclient.NewClient(rc)
	t.Cleanup(n.Stop)
	p, err := n.run()
	if err != nil {
		n.Stop()
		return nil, err
	}
	n.Dev = p.dev
	what := ""
	if n.crashable {
		what = "crashable"
	}
	n.logStarted(t, p, what)
	return n, nil
}

// devFunds is what initChain gives the developer account: what geth --dev
// gives its own.
var devFunds = new(big.Int).Lsh(big.NewInt(1), 255)

// initChain prepares dir's data directory for a --dev chain with id
// chainID (see ChainID).
func initChain(bin, dir string, chainID int64) error {
	data := filepath.Join(dir, "data")
	pass := filepath.Join(dir, "empty-passphrase")
	if err := os.WriteFile(pass, nil, 0o600); err != nil {
		return err
	}
	geth := func(args ...string) ([]byte, error) {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return nil, fmt.Errorf("geth %s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	// --lightkdf: the key is a test's, and decrypting it at every start
	// with the standard scrypt parameters takes a second of CPU.
	if _, err := geth("account", "new", "--datadir", data, "--password", pass, "--lightkdf"); err != nil {
		return err
	}
	keys, err := os.ReadDir(filepath.Join(data, "keystore"))
	if err != nil || len(keys) != 1 {
		return fmt.Errorf("reading the developer account's key file: %v (%d files)", err, len(keys))
	}
	// Key files are named UTC--<time>--<address>.
	dev := keys[0].Name()[strings.LastIndex(keys[0].Name(), "--")+2:]
	genesis, err := geth("--dev", "dumpgenesis")
	if err != nil {
		return err
	}
	// The genesis is edited as text: a decode and encode through this
	// module's go-ethereum would drop the forks it does not know of the
	// binary's.
	chainField := fmt.Sprintf(`"chainId":%d,`, DevChainID)
	if !bytes.Contains(genesis, []byte(chainField)) || !bytes.Contains(genesis, []byte(`"alloc":{`)) {
		return fmt.Errorf("geth --dev dumpgenesis: no %s or alloc in %.200s", chainField, genesis)
	}
	genesis = bytes.Replace(genesis, []byte(chainField), fmt.Appendf(nil, `"chainId":%d,`, chainID), 1)
	genesis = bytes.Replace(genesis, []byte(`"alloc":{`), fmt.Appendf(nil, `"alloc":{"0x%s":{"balance":"%s"},`, dev, hexutil.EncodeBig(devFunds)), 1)
	path := filepath.Join(dir, "genesis.json")
	if err := os.WriteFile(path, genesis, 0o600); err != nil {
		return err
	}
	_, err = geth("init", "--datadir", data, path)
	return err
}

// args are geth's arguments, with authPort for the engine API.
func (n *Node) args(authPort int) []string {
	args := []string{
		"--dev", "--dev.period", "1",
		"--datadir", filepath.Join(n.dir, "data"),
		"--ipcdisable",
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(n.httpPort),
		// miner: SetMinerGasPrice (miner_setGasPrice).
		"--http.api", "eth,net,web3,txpool,miner",
		// The engine API endpoint is opened even in dev mode; on its default
		// port two nodes would collide.
		"--authrpc.addr", "127.0.0.1", "--authrpc.port", strconv.Itoa(authPort),
		"--nodiscover", "--maxpeers", "0",
		// geth sizes its caches for mainnet (4 GiB); a dev chain needs little.
		"--cache", "256",
		"--verbosity", "3",
	}
	if n.minerGasPrice != nil {
		args = append(args, "--miner.gasprice", n.minerGasPrice.String())
	}
	if n.crashable {
		// See Crashable.
		args = append(args, "--state.scheme", "path", "--txpool.nolocals")
	}
	return args
}

// run starts a geth process on the node's data directory and HTTP port and
// waits until it answers; it is then the node's current process. On error
// the process is dead.
func (n *Node) run() (*process, error) {
	authPort, err := testnode.FreePort()
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.runs++
	logName := "geth.log"
	if n.runs > 1 {
		logName = fmt.Sprintf("geth-%d.log", n.runs)
	}
	n.mu.Unlock()
	logPath := filepath.Join(n.dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(n.Binary, n.args(authPort)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = testnode.SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", n.Binary, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), logPath: logPath, began: time.Now()}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	if err := n.waitReady(p); err != nil {
		p.kill()
		tail := p.logTail(25)
		if strings.Contains(tail, "address already in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, fmt.Errorf("%v; last lines of %s:\n%s", err, logPath, tail)
	}
	p.ready = time.Since(p.began)
	return p, nil
}

// logStarted logs the line CI's log shows for each geth process (.ci/run
// lists them): the version that ran, and for which test; then what the
// process is, if not the node's first.
func (n *Node) logStarted(t testing.TB, p *process, what string) {
	t.Helper()
	if what != "" {
		what = "; " + what
	}
	t.Logf("testgeth: geth %s answers at %s for %s after %s (binary %s, pid %d, chain %s, dev account %s, miner gas price %s, log %s%s)",
		n.Version, n.URL, t.Name(), p.ready.Round(time.Millisecond), n.Binary, p.cmd.Process.Pid, n.ChainID, n.Dev.Hex(), n.minerTipText(), p.logPath, what)
}

// waitReady polls p until it answers with chain id 1337 and names its
// developer account (into p.dev), or it exits, or readyTimeout passes.
func (n *Node) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := n.ec.ChainID(ctx)
		cancel()
		if err == nil {
			if id.Cmp(n.ChainID) != 0 {
				return fmt.Errorf("chain id %s, want %s", id, n.ChainID)
			}
			p.dev, err = n.readDevAccount()
			return err
		}
		lastErr = err
		select {
		case <-p.exited:
			return fmt.Errorf("geth exited (%v) before answering", p.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within %s: %v", n.URL, readyTimeout, lastErr)
		}
	}
}

func (n *Node) readDevAccount() (common.Address, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var accounts []common.Address
	if err := n.rpc.CallContext(ctx, &accounts, "eth_accounts"); err != nil {
		return common.Address{}, fmt.Errorf("eth_accounts: %w", err)
	}
	if len(accounts) == 0 {
		return common.Address{}, errors.New("eth_accounts: no developer account")
	}
	return accounts[0], nil
}

// Stop kills the node's process group and waits until the process is gone.
// Safe to call twice; Start registers it as a cleanup.
func (n *Node) Stop() {
	n.stopOnce.Do(func() {
		n.mu.Lock()
		n.stopped = true
		p := n.proc
		n.mu.Unlock()
		if n.ec != nil {
			n.ec.Close()
		}
		// SIGKILL, not a graceful stop: the data directory is thrown away.
		if p != nil {
			p.kill()
		}
	})
}

// kill sends SIGKILL to p's process group and waits until p is reaped.
func (p *process) kill() { testnode.Kill(p.cmd.Process, p.exited, "testgeth: geth") }

// Pid is the geth process id.
func (n *Node) Pid() int { return n.current().cmd.Process.Pid }

// Client is an ethclient connected to the node, closed by Stop.
func (n *Node) Client() *ethclient.Client { return n.ec }

// RPC is the raw JSON-RPC client under Client, for calls ethclient lacks
// (txpool_content, eth_sendTransaction).
func (n *Node) RPC() *rpc.Client { return n.rpc }

// MinerGasPrice is the least tip the node mines: 1 wei (the dev default), or
// StallingMinerGasPrice for a Stalling node.
func (n *Node) MinerGasPrice() *big.Int {
	if n.minerGasPrice == nil {
		return big.NewInt(1)
	}
	return new(big.Int).Set(n.minerGasPrice)
}

// SetMinerGasPrice changes the least tip the node mines (miner_setGasPrice):
// lowered on a Stalling node, the transactions it kept pending are mined in
// the next block. The node's pool takes the same least tip, and a raise
// drops the remote transactions below it. MinerGasPrice and Fund keep to
// the price the node was started with (a Restart's too).
func (n *Node) SetMinerGasPrice(t testing.TB, wei *big.Int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var ok bool
	if err := n.rpc.CallContext(ctx, &ok, "miner_setGasPrice", (*hexutil.Big)(wei)); err != nil || !ok {
		t.Fatalf("testgeth: miner_setGasPrice %s: %v (answer %v)", wei, err, ok)
	}
}

func (n *Node) minerTipText() string {
	if n.minerGasPrice == nil {
		return "1 wei (dev default)"
	}
	return n.minerGasPrice.String() + " wei (stalling)"
}

// Fund sends wei from the developer account to addr (eth_sendTransaction,
// signed by the node with the unlocked developer key) and returns the
// transaction's receipt once it is mined with success.
func (n *Node) Fund(t testing.TB, addr common.Address, wei *big.Int) *types.Receipt {
	t.Helper()
	args := map[string]any{"from": n.Dev, "to": addr, "value": (*hexutil.Big)(wei)}
	if n.minerGasPrice != nil {
		// The node's own default tip would be mined by a dev node but not
		// by a stalling one.
		args["maxPriorityFeePerGas"] = (*hexutil.Big)(n.minerGasPrice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var hash common.Hash
	if err := n.rpc.CallContext(ctx, &hash, "eth_sendTransaction", args); err != nil {
		t.Fatalf("testgeth: funding %s with %s wei: eth_sendTransaction: %v", addr.Hex(), wei, err)
	}
	r := n.WaitMined(t, hash)
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("testgeth: funding %s: transaction %s failed (status %d)", addr.Hex(), hash.Hex(), r.Status)
	}
	n.waitPoolPast(t, hash)
	return r
}

// waitPoolPast waits until geth's transaction pool no longer holds the mined
// transaction hash of the dev account. The pool moves to a new head after
// the receipt can be read, and validates a transaction against the state of
// the head it is at: a transfer sent between the two is refused with
// "insufficient funds" although the funding is mined.
func (n *Node) waitPoolPast(t testing.TB, hash common.Hash) {
	t.Helper()
	type content struct {
		Pending map[string]struct {
			Hash common.Hash `json:"hash"`
		} `json:"pending"`
	}
	_, ok, err := poll(func(ctx context.Context) (content, error) {
		var c content
		err := n.rpc.CallContext(ctx, &c, "txpool_contentFrom", n.Dev)
		return c, err
	}, func(c content, err error) bool {
		if err != nil {
			return false
		}
		for _, tx := range c.Pending {
			if tx.Hash == hash {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("testgeth: the pool still holds the mined transaction %s after %s: %v", hash.Hex(), minedTimeout, err)
	}
}

// WaitMined polls for hash's receipt and returns it once the transaction is
// mined (successful or reverted). It fails t after a minute.
func (n *Node) WaitMined(t testing.TB, hash common.Hash) *types.Receipt {
	t.Helper()
	r, ok, err := poll(func(ctx context.Context) (*types.Receipt, error) { return n.ec.TransactionReceipt(ctx, hash) },
		func(_ *types.Receipt, err error) bool {
			// Not found yet, or "transaction indexing is in progress": ask again.
			if err != nil && !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing") {
				t.Logf("testgeth: receipt of %s: %v", hash.Hex(), err)
			}
			return err == nil
		})
	if !ok {
		t.Fatalf("testgeth: transaction %s not mined within %s: %v", hash.Hex(), minedTimeout, err)
	}
	return r
}

// WaitHead waits until the node's head is at least number (a block comes
// every second) and returns the head. It fails t after a minute.
func (n *Node) WaitHead(t testing.TB, number uint64) uint64 {
	t.Helper()
	head, ok, err := poll(n.ec.BlockNumber, func(head uint64, err error) bool { return err == nil && head >= number })
	if !ok {
		p := n.current()
		t.Fatalf("testgeth: head did not reach block %d within %s (head %d, %v); last lines of %s:\n%s", number, minedTimeout, head, err, p.logPath, p.logTail(25))
	}
	return head
}

// poll asks every pollInterval, each call bounded by callTimeout, until done
// takes the answer, for at most minedTimeout (testnode.Poll).
func poll[T any](ask func(context.Context) (T, error), done func(T, error) bool) (T, bool, error) {
	return testnode.Poll(ask, done, pollInterval, callTimeout, minedTimeout)
}

// Nonce is addr's nonce at the head: how many of its transactions the chain
// holds.
func (n *Node) Nonce(t testing.TB, addr common.Address) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	nonce, err := n.ec.NonceAt(ctx, addr, nil)
	if err != nil {
		t.Fatalf("testgeth: nonce of %s: %v", addr.Hex(), err)
	}
	return nonce
}

func (p *process) logTail(lines int) string { return testnode.LogTail(p.logPath, lines) }

var (
	versionsMu sync.Mutex
	versions   = map[string]string{} // binary path → version
)

// Binary returns the geth binary to run and its version: EnvBinary, else
// geth on PATH. Without one it skips t, or fails it under CI=true. A binary
// named by EnvBinary that does not run fails t.
func Binary(t testing.TB) (path, version string) {
	t.Helper()
	path = testnode.Binary(t, "testgeth", "geth", EnvBinary, InstallCommand)
	versionsMu.Lock()
	defer versionsMu.Unlock()
	if v, ok := versions[path]; ok {
		return path, v
	}
	v, err := readVersion(path)
	if err != nil {
		t.Fatalf("testgeth: geth binary %s: %v", path, err)
	}
	versions[path] = v
	return path, v
}

// readVersion runs `geth version` and returns its "Version:" line's value.
func readVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("`%s version`: %w: %s", path, err, bytes.TrimSpace(out))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("`%s version` printed no Version line: %s", path, bytes.TrimSpace(out))
}
