package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// The builder bench's baseline: the same pre-signed transactions, sent the
// same way (Clients at once, each sender's in nonce order), to a real
// `geth --dev`'s eth_sendRawTransaction in the same run, so that ledgerq's
// intake is compared with geth's on the same machine at the same moment.

// BaselineGeth names the geth baseline (--baseline geth).
const BaselineGeth = "geth"

// EnvGeth names the environment variable that holds the geth binary the
// baseline runs when --geth is not given (else geth on PATH).
const EnvGeth = "LEDGERQ_TEST_GETH"

// GethReport is the baseline's outcome.
type GethReport struct {
	// Version is what `geth version` says, e.g. 1.17.8-stable.
	Version string
	// Accepted, Retries and Refused count as for ledgerq (a full pool or
	// account is retried after a pause).
	Accepted, Retries, Refused int64
	// SendTime is from the first send to the last acceptance; FundTime the
	// funding of the senders before it.
	SendTime, FundTime time.Duration
}

// GethBinary returns the geth the baseline runs: path, else $LEDGERQ_TEST_GETH,
// else geth on PATH.
func GethBinary(path string) (string, error) {
	if path == "" {
		path = os.Getenv(EnvGeth)
	}
	if path == "" {
		path = "geth"
	}
	found, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("--baseline geth: no geth binary (give --geth PATH or set %s): %w", EnvGeth, err)
	}
	return found, nil
}

// gethNode is a running `geth --dev --dev.period 1` with a private data
// directory and HTTP JSON-RPC on a free loopback port.
type gethNode struct {
	url     string
	version string
	cmd     *exec.Cmd
	exited  chan struct{}
	dir     string
	log     string
}

// gethReadyTimeout bounds how long a starting geth may take to answer (2–6
// s on an idle machine).
const gethReadyTimeout = time.Minute

// startGeth runs bin with a txpool that refuses none of slots transactions
// (its per-account and global limits raised), and returns once it answers.
func startGeth(ctx context.Context, bin string, slots int) (*gethNode, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("running %s version: %w", bin, err)
	}
	version := "unknown"
	if m := regexp.MustCompile(`(?m)^Version: (\S+)`).FindSubmatch(out); m != nil {
		version = string(m[1])
	}
	dir, err := os.MkdirTemp("", "ledgerq-bench-geth-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	limit := strconv.Itoa(slots)
	g := &gethNode{
		url: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), version: version, exited: make(chan struct{}),
		dir: dir, log: filepath.Join(dir, "geth.log"),
	}
	logFile, err := os.Create(g.log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	g.cmd = exec.Command(bin,
		"--dev", "--dev.period", "1", "--datadir", filepath.Join(dir, "data"), "--ipcdisable",
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(ports[0]), "--http.api", "eth,net,web3",
		"--authrpc.addr", "127.0.0.1", "--authrpc.port", strconv.Itoa(ports[1]),
		"--nodiscover", "--maxpeers", "0", "--cache", "256", "--verbosity", "2",
		// Raised so that the pool takes every transaction of the run, as
		// ledgerq's pool limits are for the same run.
		"--txpool.accountslots", limit, "--txpool.globalslots", limit,
		"--txpool.accountqueue", limit, "--txpool.globalqueue", limit,
	)
	g.cmd.Stdout, g.cmd.Stderr = logFile, logFile
	if err := g.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	go func() {
		_ = g.cmd.Wait()
		close(g.exited)
	}()
	if err := g.waitReady(ctx); err != nil {
		tail, _ := os.ReadFile(g.log)
		g.stop()
		return nil, fmt.Errorf("geth %s: %w; its log:\n%s", version, err, lastLines(tail, 20))
	}
	return g, nil
}

func (g *gethNode) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(gethReadyTimeout)
	cl, err := rpc.DialContext(ctx, g.url)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		var id hexutil.Big
		err := cl.CallContext(cctx, &id, "eth_chainId")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-g.exited:
			return errors.New("geth exited before answering")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within %s: %w", g.url, gethReadyTimeout, err)
		}
	}
}

// stop kills geth, waits until it is gone and removes its data directory.
func (g *gethNode) stop() {
	_ = g.cmd.Process.Kill()
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
	}
	_ = os.RemoveAll(g.dir)
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// dialClients returns an ethclient for url whose HTTP transport keeps one
// connection per client alive, as that many clients of their own would.
func dialClients(ctx context.Context, url string, clients int) (*ethclient.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = clients, clients
	rc, err := rpc.DialOptions(ctx, url, rpc.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, err
	}
	return ethclient.NewClient(rc), nil
}

// runGethBaseline starts geth, funds the senders from its developer
// account, sends txs as the ledgerq run sends them, and stops geth.
func runGethBaseline(ctx context.Context, c BuilderConfig, senders []common.Address, txs [][]*types.Transaction) (*GethReport, error) {
	bin, err := GethBinary(c.Geth)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, s := range txs {
		total += len(s)
	}
	g, err := startGeth(ctx, bin, max(total, 16)+len(senders))
	if err != nil {
		return nil, err
	}
	defer g.stop()
	rep := &GethReport{Version: g.version}
	fmt.Fprintf(c.Progress, "bench: geth %s answers at %s; funding %d senders\n", g.version, g.url, len(senders))
	cl, err := dialClients(ctx, g.url, c.Clients)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	began := time.Now()
	if err := fundFromDevAccount(ctx, cl, senders, new(big.Int).Mul(big.NewInt(10), big.NewInt(1e18))); err != nil {
		return nil, err
	}
	rep.FundTime = time.Since(began)
	var counts sendCounts
	start := time.Now()
	err = sendInNonceOrder(ctx, cl, txs, c.Clients, &counts)
	rep.SendTime = time.Since(start)
	rep.Accepted, rep.Retries, rep.Refused = counts.accepted.Load(), counts.retries.Load(), counts.refused.Load()
	fmt.Fprintf(c.Progress, "bench: geth accepted %d in %s\n", rep.Accepted, round(rep.SendTime))
	if err != nil {
		return rep, fmt.Errorf("geth baseline: %w", err)
	}
	return rep, nil
}

// fundFromDevAccount sends wei to every address from eth_accounts[0] (geth
// --dev's unlocked developer account) and waits until each funding
// transaction is mined.
func fundFromDevAccount(ctx context.Context, cl *ethclient.Client, addrs []common.Address, wei *big.Int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var accounts []common.Address
	if err := cl.Client().CallContext(ctx, &accounts, "eth_accounts"); err != nil {
		return fmt.Errorf("funding: eth_accounts: %w", err)
	}
	if len(accounts) == 0 {
		return errors.New("funding: eth_accounts lists no account: not a geth --dev")
	}
	// Nonces given, not left to the node: geth's own choice for a quick run
	// of sends can repeat one across a new block (replacement underpriced).
	nonce, err := cl.PendingNonceAt(ctx, accounts[0])
	if err != nil {
		return fmt.Errorf("funding: the developer account's nonce: %w", err)
	}
	hashes := make([]common.Hash, len(addrs))
	for i, a := range addrs {
		args := map[string]any{"from": accounts[0], "to": a, "value": (*hexutil.Big)(wei), "nonce": hexutil.Uint64(nonce + uint64(i))}
		if err := cl.Client().CallContext(ctx, &hashes[i], "eth_sendTransaction", args); err != nil {
			return fmt.Errorf("funding %s: eth_sendTransaction: %w", a.Hex(), err)
		}
	}
	for i, h := range hashes {
		for {
			r, err := cl.TransactionReceipt(ctx, h)
			if err == nil {
				if r.Status != types.ReceiptStatusSuccessful {
					return fmt.Errorf("funding %s: transaction %s failed", addrs[i].Hex(), h.Hex())
				}
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("funding %s: transaction %s not mined: %w", addrs[i].Hex(), h.Hex(), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// retryable reports whether err is the pool's back-pressure (geth's and
// ledgerq's messages are the same): the client waits and sends again.
func retryable(err error) bool {
	return strings.HasPrefix(err.Error(), "txpool is full") || strings.HasPrefix(err.Error(), "account limit exceeded")
}
