package testanvil

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

// EnvBinary names the environment variable holding the anvil binary's path.
const EnvBinary = "LEDGERQ_TEST_ANVIL"

// InstallCommand installs the anvil the tests are written against (the
// version pinned in test/clients/package-lock.json).
const InstallCommand = "cd test/clients && npm ci"

// DefaultChainID is anvil's own default chain id.
const DefaultChainID = 31337

// DefaultBlockTime is how often a node makes a block unless told otherwise:
// every second, as testgeth's geth does.
const DefaultBlockTime = time.Second

const (
	// readyTimeout bounds how long a starting node may take to answer (well
	// under a second on an idle machine; CI's machines are shared).
	readyTimeout = 60 * time.Second
	// minedTimeout bounds WaitMined and WaitHead.
	minedTimeout = 60 * time.Second
	callTimeout  = 10 * time.Second
	pollInterval = 50 * time.Millisecond
	// stopTimeout bounds how long anvil may take to dump its state and exit
	// on SIGINT.
	stopTimeout = 30 * time.Second
	// portAttempts: a free port found by listening and closing can be taken
	// by another process before anvil binds it; then anvil exits and Start
	// (or Restart) tries again.
	portAttempts = 3
)

// Option changes how Start runs the node.
type Option func(*options)

type options struct {
	chainID   uint64
	blockTime time.Duration // 0: automine, a block per transaction
}

// ChainID runs the node with --chain-id id instead of DefaultChainID (two
// nodes of different chains in one test).
func ChainID(id uint64) Option {
	return func(o *options) { o.chainID = id }
}

// BlockTime makes a block every d (--block-time) instead of
// DefaultBlockTime.
func BlockTime(d time.Duration) Option {
	return func(o *options) { o.blockTime = d }
}

// Automine makes a block for each transaction as it arrives, anvil's own
// default: a sent transaction is mined before its send returns.
func Automine() Option {
	return func(o *options) { o.blockTime = 0 }
}

// Node is a running anvil.
type Node struct {
	// URL is the HTTP JSON-RPC endpoint, http://127.0.0.1:<port>.
	URL string
	// ChainID is the chain id the node was started with.
	ChainID *big.Int
	// BlockTime is how often it makes a block; 0 means a block per
	// transaction.
	BlockTime time.Duration
	// Accounts are the developer accounts (anvil's default mnemonic), each
	// funded with 10,000 ether; Keys holds their private keys, in the same
	// order.
	Accounts []common.Address
	Keys     []*ecdsa.PrivateKey
	// Version is what `anvil --version` says, e.g. 1.7.1.
	Version string
	// Binary is the path of the anvil that runs.
	Binary string

	rpc      *rpc.Client
	ec       *ethclient.Client
	stopOnce sync.Once

	dir      string // logs, the state file and the config anvil writes
	httpPort int    // the same for every process, so URL stays valid

	mu      sync.Mutex
	proc    *process // the anvil process running now, or the last one
	runs    int
	stopped bool
}

// process is one run of anvil.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been reaped
	logPath string
	began   time.Time
	ready   time.Duration
}

// Start runs an anvil node for t and returns once it answers JSON-RPC. The
// node is killed when t ends (Stop). Without an anvil binary t is skipped,
// or fails under CI=true.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	o := options{chainID: DefaultChainID, blockTime: DefaultBlockTime}
	for _, opt := range opts {
		opt(&o)
	}
	bin, version := Binary(t)
	// Made before Stop is registered, so it is removed after the process
	// that writes into it is dead (cleanups run last-in first-out).
	dir := t.TempDir()
	n := &Node{
		ChainID:   new(big.Int).SetUint64(o.chainID),
		BlockTime: o.blockTime,
		Version:   version,
		Binary:    bin,
		dir:       dir,
	}
	t.Cleanup(n.Stop)
	var (
		p   *process
		err error
	)
	for attempt := 1; attempt <= portAttempts; attempt++ {
		if n.httpPort, err = testnode.FreePort(); err != nil {
			break
		}
		n.URL = fmt.Sprintf("http://127.0.0.1:%d", n.httpPort)
		if p, err = n.run(); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		t.Fatalf("testanvil: starting anvil %s: %v", version, err)
	}
	rc, err := rpc.Dial(n.URL) // HTTP: connects on the first call
	if err != nil {
		t.Fatalf("testanvil: dialing %s: %v", n.URL, err)
	}
	n.rpc = rc
	n.ec = ethclient.NewClient(rc)
	if err := n.readAccounts(); err != nil {
		t.Fatalf("testanvil: %v", err)
	}
	n.logStarted(t, p, "")
	return n
}

var errPortTaken = errors.New("the port was taken before anvil bound it")

// args are anvil's arguments. The state file is loaded when it exists and
// written every second (and on a clean exit): what Restart comes back with.
func (n *Node) args() []string {
	args := []string{
		"--host", "127.0.0.1", "--port", strconv.Itoa(n.httpPort),
		"--chain-id", n.ChainID.String(),
		"--config-out", filepath.Join(n.dir, "config.json"),
		"--state", filepath.Join(n.dir, "state.json"), "--state-interval", "1",
	}
	if n.BlockTime > 0 {
		args = append(args, "--block-time", strconv.FormatFloat(n.BlockTime.Seconds(), 'f', -1, 64))
	}
	return args
}

// run starts an anvil process on the node's directory and port and waits
// until it answers with the node's chain id; it is then the node's current
// process. On error the process is dead.
func (n *Node) run() (*process, error) {
	n.mu.Lock()
	n.runs++
	logPath := filepath.Join(n.dir, fmt.Sprintf("anvil-%d.log", n.runs))
	n.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(n.Binary, n.args()...)
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
		if strings.Contains(tail, "in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, fmt.Errorf("%v; last lines of %s:\n%s", err, logPath, tail)
	}
	p.ready = time.Since(p.began)
	return p, nil
}

// waitReady polls until the node answers eth_chainId with its chain id, or
// p exits, or readyTimeout passes. It asks with a client of its own: n.rpc
// is made once the first process answers.
func (n *Node) waitReady(p *process) error {
	rc, err := rpc.Dial(n.URL)
	if err != nil {
		return err
	}
	defer rc.Close()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var id hexutil.Big
		err := rc.CallContext(ctx, &id, "eth_chainId")
		cancel()
		if err == nil {
			if id.ToInt().Cmp(n.ChainID) != 0 {
				return fmt.Errorf("chain id %s, want %s", id.ToInt(), n.ChainID)
			}
			return nil
		}
		lastErr = err
		select {
		case <-p.exited:
			return fmt.Errorf("anvil exited (%v) before answering", p.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within %s: %v", n.URL, readyTimeout, lastErr)
		}
	}
}

// readAccounts reads the developer accounts and their keys from the
// config anvil wrote (--config-out) before it answered.
func (n *Node) readAccounts() error {
	path := filepath.Join(n.dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg struct {
		Accounts []common.Address `json:"available_accounts"`
		Keys     []string         `json:"private_keys"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(cfg.Keys) == 0 || len(cfg.Keys) != len(cfg.Accounts) {
		return fmt.Errorf("%s: %d accounts and %d keys", path, len(cfg.Accounts), len(cfg.Keys))
	}
	for i, hex := range cfg.Keys {
		key, err := crypto.HexToECDSA(strings.TrimPrefix(hex, "0x"))
		if err != nil {
			return fmt.Errorf("%s: key %d: %w", path, i, err)
		}
		if addr := crypto.PubkeyToAddress(key.PublicKey); addr != cfg.Accounts[i] {
			return fmt.Errorf("%s: key %d is of %s, not of account %s", path, i, addr.Hex(), cfg.Accounts[i].Hex())
		}
		n.Keys = append(n.Keys, key)
	}
	n.Accounts = cfg.Accounts
	return nil
}

// logStarted logs the line CI's log shows for each anvil process (.ci/run
// lists them): the version that ran, and for which test.
func (n *Node) logStarted(t testing.TB, p *process, what string) {
	t.Helper()
	if what != "" {
		what = "; " + what
	}
	blocks := "a block per transaction"
	if n.BlockTime > 0 {
		blocks = "a block every " + n.BlockTime.String()
	}
	t.Logf("testanvil: anvil %s answers at %s for %s after %s (binary %s, pid %d, chain %s, %s, log %s%s)",
		n.Version, n.URL, t.Name(), p.ready.Round(time.Millisecond), n.Binary, p.cmd.Process.Pid, n.ChainID, blocks, p.logPath, what)
}

// current is the anvil process running now, or the last one.
func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Kill SIGKILLs anvil and waits until it is gone: the node is down, and
// clients get connection errors, until Restart. The chain it had at its
// last state dump (at most a second ago) is kept for Restart; its pool is
// lost.
func (n *Node) Kill() {
	n.current().kill()
}

// Interrupt stops anvil cleanly (SIGINT): it dumps its whole chain to the
// state file and exits. Restart then comes back with every block.
func (n *Node) Interrupt(t testing.TB) {
	t.Helper()
	p := n.current()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("testanvil: Interrupt: signalling anvil pid %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.kill()
		t.Fatalf("testanvil: Interrupt: anvil pid %d did not stop within %s of SIGINT; last lines of %s:\n%s", p.cmd.Process.Pid, stopTimeout, p.logPath, p.logTail(25))
	}
}

// Restart starts anvil again after Kill or Interrupt, on the same port (URL
// stays valid, and clients dialed before keep working) and state file, and
// returns the head it came back with.
func (n *Node) Restart(t testing.TB) uint64 {
	t.Helper()
	n.mu.Lock()
	stopped, p := n.stopped, n.proc
	n.mu.Unlock()
	if stopped {
		t.Fatalf("testanvil: Restart: the node was stopped")
	}
	select {
	case <-p.exited:
	default:
		t.Fatalf("testanvil: Restart: anvil pid %d is running; Kill it first", p.cmd.Process.Pid)
	}
	var err error
	// The port was free for a moment: another process may have bound it,
	// most likely a test finding a free port, which closes it at once.
	for attempt := 1; attempt <= portAttempts; attempt++ {
		if p, err = n.run(); !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(time.Second) // another process's port: nothing to wait on
	}
	if err != nil {
		t.Fatalf("testanvil: restarting anvil at %s: %v", n.URL, err)
	}
	head := n.Head(t)
	n.logStarted(t, p, fmt.Sprintf("restarted, loaded head %d", head))
	return head
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
		if p != nil {
			p.kill()
		}
	})
}

// kill sends SIGKILL to p's process group and waits until p is reaped.
func (p *process) kill() { testnode.Kill(p.cmd.Process, p.exited, "testanvil: anvil") }

// Pid is the anvil process id.
func (n *Node) Pid() int { return n.current().cmd.Process.Pid }

// Client is an ethclient connected to the node, closed by Stop.
func (n *Node) Client() *ethclient.Client { return n.ec }

// RPC is the raw JSON-RPC client under Client, for anvil's own methods.
func (n *Node) RPC() *rpc.Client { return n.rpc }

// call makes one JSON-RPC call, failing t on an error.
func (n *Node) call(t testing.TB, result any, method string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := n.rpc.CallContext(ctx, result, method, args...); err != nil {
		t.Fatalf("testanvil: %s: %v", method, err)
	}
}

// ReorgTx is a signed transaction anvil_reorg puts into one of the blocks
// it makes in place of the ones it removes: Block counts from the first of
// them (0) up.
type ReorgTx struct {
	Raw   []byte
	Block uint64
}

// Reorg replaces the chain's last depth blocks with as many new ones
// (anvil_reorg), empty but for txs: the transactions of the removed blocks
// leave the chain, and the pool does not get them back. The head's number
// stays; its hash changes.
func (n *Node) Reorg(t testing.TB, depth uint64, txs ...ReorgTx) {
	t.Helper()
	pairs := make([][2]any, len(txs))
	for i, tx := range txs {
		pairs[i] = [2]any{hexutil.Bytes(tx.Raw), tx.Block}
	}
	n.call(t, nil, "anvil_reorg", depth, pairs)
}

// DropAllTransactions empties the node's transaction pool
// (anvil_dropAllTransactions), as a node that restarts or evicts does.
func (n *Node) DropAllTransactions(t testing.TB) {
	t.Helper()
	n.call(t, nil, "anvil_dropAllTransactions")
}

// Mine makes one block now (evm_mine), whatever the block time.
func (n *Node) Mine(t testing.TB) {
	t.Helper()
	n.call(t, nil, "evm_mine")
}

// SetBalance sets addr's balance to wei (anvil_setBalance), without a
// transaction: the quickest way to fund an account a test made.
func (n *Node) SetBalance(t testing.TB, addr common.Address, wei *big.Int) {
	t.Helper()
	n.call(t, nil, "anvil_setBalance", addr, (*hexutil.Big)(wei))
}

// Head is the number of the node's latest block.
func (n *Node) Head(t testing.TB) uint64 {
	t.Helper()
	var head hexutil.Uint64
	n.call(t, &head, "eth_blockNumber")
	return uint64(head)
}

// Nonce is addr's nonce at the head: how many of its transactions the chain
// holds.
func (n *Node) Nonce(t testing.TB, addr common.Address) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	nonce, err := n.ec.NonceAt(ctx, addr, nil)
	if err != nil {
		t.Fatalf("testanvil: nonce of %s: %v", addr.Hex(), err)
	}
	return nonce
}

// WaitMined polls for hash's receipt and returns it once the transaction is
// mined (successful or reverted). It fails t after a minute.
func (n *Node) WaitMined(t testing.TB, hash common.Hash) *types.Receipt {
	t.Helper()
	r, ok, err := poll(func(ctx context.Context) (*types.Receipt, error) { return n.ec.TransactionReceipt(ctx, hash) },
		func(_ *types.Receipt, err error) bool {
			if err != nil && !errors.Is(err, ethereum.NotFound) {
				t.Logf("testanvil: receipt of %s: %v", hash.Hex(), err)
			}
			return err == nil
		})
	if !ok {
		t.Fatalf("testanvil: transaction %s not mined within %s: %v", hash.Hex(), minedTimeout, err)
	}
	return r
}

// WaitHead waits until the node's head is at least number and returns the
// head. It fails t after a minute.
func (n *Node) WaitHead(t testing.TB, number uint64) uint64 {
	t.Helper()
	head, ok, err := poll(n.ec.BlockNumber, func(head uint64, err error) bool { return err == nil && head >= number })
	if !ok {
		p := n.current()
		t.Fatalf("testanvil: head did not reach block %d within %s (head %d, %v); last lines of %s:\n%s", number, minedTimeout, head, err, p.logPath, p.logTail(25))
	}
	return head
}

// poll asks every pollInterval, each call bounded by callTimeout, until done
// takes the answer, for at most minedTimeout (testnode.Poll).
func poll[T any](ask func(context.Context) (T, error), done func(T, error) bool) (T, bool, error) {
	return testnode.Poll(ask, done, pollInterval, callTimeout, minedTimeout)
}

func (p *process) logTail(lines int) string { return testnode.LogTail(p.logPath, lines) }

var (
	versionsMu sync.Mutex
	versions   = map[string]string{} // binary path → version
)

// Binary returns the anvil binary to run and its version: EnvBinary, else
// the one npm installed under test/clients/node_modules. Without one it
// skips t, or fails it under CI=true. A binary that does not run fails t.
func Binary(t testing.TB) (path, version string) {
	t.Helper()
	path = os.Getenv(EnvBinary)
	if path == "" {
		p, err := npmBinary()
		if err != nil {
			if testnode.InCI() {
				t.Fatalf("testanvil: CI=true and no anvil binary: %s is unset and %v (.ci/run installs it with %s)", EnvBinary, err, InstallCommand)
			}
			t.Skipf("testanvil: skipped: no anvil binary (set %s=/path/to/anvil, or install it with %s): %v", EnvBinary, InstallCommand, err)
		}
		path = p
	}
	versionsMu.Lock()
	defer versionsMu.Unlock()
	if v, ok := versions[path]; ok {
		return path, v
	}
	v, err := readVersion(path)
	if err != nil {
		t.Fatalf("testanvil: anvil binary %s: %v", path, err)
	}
	versions[path] = v
	return path, v
}

// npmBinary is the anvil that `npm ci` in test/clients installed for this
// machine: @foundry-rs/anvil's platform package
// (@foundry-rs/anvil-<os>-<arch>) holds it in bin/.
func npmBinary() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "test", "clients", "node_modules", "@foundry-rs",
		fmt.Sprintf("anvil-%s-%s", runtime.GOOS, runtime.GOARCH), "bin", "anvil")
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	return path, nil
}

// moduleRoot is the nearest directory up from the working directory (a
// test's package directory) that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// readVersion runs `anvil --version` and returns its "Version:" value.
func readVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("`%s --version`: %w: %s", path, err, bytes.TrimSpace(out))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if _, v, ok := strings.Cut(sc.Text(), "Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("`%s --version` printed no Version line: %s", path, bytes.TrimSpace(out))
}
