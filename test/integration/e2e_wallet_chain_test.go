package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestE2E_WalletLaneOnACrashingGethSendsEveryTaskOnceCheckedBlockByBlock is
// the wallet lane's chain-side check: several wallets on a real geth --dev,
// every task with call data of its own, two `ledgerq serve` processes
// SIGKILLed and restarted while tasks stream in, geth frozen (SIGSTOP) for a
// while, and geth crashed (SIGKILL) after its last blocks held transactions
// of every wallet, coming back without them. Then every block is read with
// ethclient: each task's call data is mined exactly once, in the transaction
// the task records (no task is done with a hash the chain lacks), a task in
// error has none mined, every mined transaction of the wallets is a task's or
// a no-op ledgerq signed, nonces are contiguous from 0; and every wallet
// still sends.
//
// LEDGERQ_E2E_WALLET_TASKS sets the tasks per wallet (default 30);
// LEDGERQ_E2E_FAULT_SEED the random choices.
func TestE2E_WalletLaneOnACrashingGethSendsEveryTaskOnceCheckedBlockByBlock(t *testing.T) {
	t.Parallel()
	perWallet := 30
	if s := os.Getenv("LEDGERQ_E2E_WALLET_TASKS"); s != "" {
		var err error
		perWallet, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("LEDGERQ_E2E_FAULT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	rnd := rand.New(rand.NewPCG(uint64(seed), 18))
	t.Logf("seed %d (LEDGERQ_E2E_FAULT_SEED), %d tasks per wallet", seed, perWallet)

	g := testgeth.Start(t, testgeth.Crashable())
	c := newChainRun(t, gethNode(g), 3)
	c.faults = "one geth freeze, one geth crash losing blocks"
	c.checkpointAfterFunding(g)

	// 1: tasks stream in while the serve processes are SIGKILLed and
	// restarted, and geth is frozen for 5 s once.
	third := perWallet / 3
	c.startServes(2)
	for round := range 3 {
		c.postEach(third / 3)
		if round == 1 {
			require.NoError(t, syscall.Kill(g.Pid(), syscall.SIGSTOP))
			c.postEach(2)
			time.Sleep(5 * time.Second) // geth stays frozen this long: the fault is the point
			require.NoError(t, syscall.Kill(g.Pid(), syscall.SIGCONT))
			t.Log("geth frozen for 5 s")
		}
		time.Sleep(time.Duration(200+rnd.IntN(1500)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
		c.killAServe(rnd)
	}
	c.postEach(third - 3*(third/3))
	c.awaitEnded(3 * time.Minute)

	// 2: more tasks, mined and done; then geth crashes and comes back at its
	// checkpoint, without every block since (phase 1's and these).
	c.postEach(third)
	c.awaitEnded(3 * time.Minute)
	before := c.nonces()
	g.Kill()
	head := g.Restart(t)
	after := c.nonces()
	for i, w := range c.wallets {
		require.Less(t, after[i], before[i], "geth lost blocks holding %s's transactions (head %d)", w.Hex(), head)
	}
	t.Logf("geth crashed and came back at block %d: nonces %v -> %v", head, before, after)

	// 3: the rest, with the serve processes killed again.
	for range 2 {
		c.postEach((perWallet - 2*third) / 2)
		time.Sleep(time.Duration(200+rnd.IntN(1500)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
		c.killAServe(rnd)
	}
	c.postEach(perWallet - 2*third - 2*((perWallet-2*third)/2))
	c.awaitEnded(4 * time.Minute)

	// Every wallet still sends.
	c.postEach(1)
	c.awaitEnded(2 * time.Minute)
	c.stopServes()
	c.checkBlocks()
}

// chainRun is the state of TestE2E_WalletLaneOnACrashingGeth… and of the
// other chain-side runs: wallets w0, w1, … each on a real node, the serve
// processes and the tasks posted.
type chainRun struct {
	t     *testing.T
	db    string
	dir   string
	args  []string
	token string
	// env is added to every serve process's environment (a signer's
	// configuration: SOFTHSM2_CONF, AWS credentials).
	env []string
	// to is every task's recipient (chainRunRecipient when empty).
	to      string
	wallets []common.Address
	names   []string
	// nodes holds each wallet's chain: nodes[w] is the real node wallet w
	// sends on, read by the verdict.
	nodes []*testNode

	// start starts one serve process and returns it with its API's URL
	// (testproc.StartReady when nil; the provider runs start again a
	// process that exits before it is ready).
	start func() (*testproc.Proc, string)

	mu     sync.Mutex
	serves []*testproc.Proc
	apis   []string
	// tasks by wallet: the task ids and, by id, the call data.
	ids  [][]string
	data map[string][]byte
	n    int
	// kills counts the SIGKILLs of serve processes; faults says what else
	// the run did to the processes, for checkBlocks's summary.
	kills  int
	faults string
}

// testNode is a real node a run's wallets send on, geth --dev or anvil, as
// the verdict reads it: directly, never through a proxy serve may use.
type testNode struct {
	// chain is its name in --wallet-chain; "" when serve reaches it by the
	// --wallet-ledger-url shorthand.
	chain   string
	url     string
	chainID int64
	client  *ethclient.Client
	fund    func(t testing.TB, addr common.Address, wei *big.Int)
}

func gethNode(g *testgeth.Node) *testNode {
	return &testNode{url: g.URL, chainID: g.ChainID.Int64(), client: g.Client(),
		fund: func(t testing.TB, addr common.Address, wei *big.Int) { g.Fund(t, addr, wei) }}
}

func anvilNode(a *testanvil.Node) *testNode {
	return &testNode{url: a.URL, chainID: a.ChainID.Int64(), client: a.Client(), fund: a.SetBalance}
}

// chainRunRecipient receives every task's value unless chainRun.to names
// another.
const chainRunRecipient = "0x000000000000000000000000000000000000dEaD"

// chainRunPassphrase unlocks every keystore file of a chainRun.
const chainRunPassphrase = "chain run passphrase"

// newChainRun is a run of wallets w0, w1, … on the one node n, which serve
// reaches through the --wallet-ledger-url shorthand.
func newChainRun(t *testing.T, n *testNode, wallets int) *chainRun {
	t.Helper()
	c := newEmptyChainRun(t, "--wallet-ledger-url", n.url)
	for i := range wallets {
		addr, file, _ := newKeystoreWallet(t, c.dir, chainRunPassphrase)
		c.addWallet(fmt.Sprintf("w%d", i), n, common.Address(addr), file)
	}
	c.createKey()
	return c
}

// newEmptyChainRun is a run with a database, serve's settings and chain
// arguments, and no wallet yet: addWallet adds them, createKey ends.
func newEmptyChainRun(t *testing.T, chainArgs ...string) *chainRun {
	t.Helper()
	c := &chainRun{t: t, db: testdb.New(t).URL, dir: t.TempDir(), data: map[string][]byte{}}
	c.args = append([]string{"serve", "--batch-ledger", "sim",
		"--wallet-ledger", "evm", "--wallet-ledger-timeout", "2s", "--wallet-cycle-budget", "1s",
		"--wallet-follow-interval", "200ms", "--poll-interval", "200ms", "--shard-lease", "6s",
		"--wallet-replaced-after", "10s", "--wallet-stall-timeout", "20s", "--wallet-rebroadcast-after", "5s", "--shutdown-timeout", "5s"},
		chainArgs...)
	return c
}

// addWallet makes the keystore file at file (unlocked by
// chainRunPassphrase) the wallet name on n's chain, and funds it there.
func (c *chainRun) addWallet(name string, n *testNode, addr common.Address, file string) {
	c.t.Helper()
	spec := name + "=" + file
	if n.chain != "" {
		spec = name + "@" + n.chain + "=" + file
	}
	c.args = append(c.args, "--wallet-keystore", spec)
	c.adoptWallet(name, n, addr)
}

// addSignerWallet declares the wallet name on n's chain whose key is in a
// signer backend (--wallet-signer name=NAME,backend=BACKEND[,key=KEY],
// address=ADDR: serve refuses the key of another address), and funds it.
func (c *chainRun) addSignerWallet(name string, n *testNode, backend, key string, addr common.Address) {
	c.t.Helper()
	decl := "name=" + name + ",backend=" + backend
	if n.chain != "" {
		decl += ",chain=" + n.chain
	}
	if key != "" {
		decl += ",key=" + key
	}
	c.args = append(c.args, "--wallet-signer", decl+",address="+addr.Hex())
	c.adoptWallet(name, n, addr)
}

// adoptWallet makes the wallet name, at addr on n's chain, one the run
// posts to and checks, and funds it there; serve knows it from its
// arguments (addWallet, addSignerWallet) or from POST /v1/wallets.
func (c *chainRun) adoptWallet(name string, n *testNode, addr common.Address) {
	c.t.Helper()
	n.fund(c.t, addr, new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18)))
	c.wallets, c.names, c.nodes = append(c.wallets, addr), append(c.names, name), append(c.nodes, n)
	c.ids = append(c.ids, nil)
}

// createKey names the passphrase file in serve's arguments and makes the
// API key that posts to every wallet.
func (c *chainRun) createKey() {
	c.t.Helper()
	c.args = append(c.args, "--wallet-passphrase-file", filepath.Join(c.dir, "passphrase"))
	st, err := store.OpenPool(ctxT(c.t, 10*time.Second), c.db, 0)
	require.NoError(c.t, err)
	defer st.Close()
	_, c.token, err = st.APIKeyCreate(ctxT(c.t, 10*time.Second), store.APIKeyCreateParams{Now: time.Now(), Name: "chain run", Scopes: store.WalletScopes(c.names...)})
	require.NoError(c.t, err)
}

// checkpointAfterFunding makes geth's last clean stop come after the
// fundings, so that its crash later loses only ledgerq's transactions.
func (c *chainRun) checkpointAfterFunding(g *testgeth.Node) {
	c.t.Helper()
	head := g.Checkpoint(c.t)
	c.t.Logf("geth checkpoint at block %d, after funding %d wallets", head, len(c.wallets))
}

// startOne starts one serve process (chainRun.start).
func (c *chainRun) startOne() (*testproc.Proc, string) {
	c.t.Helper()
	if c.start != nil {
		return c.start()
	}
	return testproc.StartReady(c.t, c.dir, append([]string{"DATABASE_URL=" + c.db}, c.env...), c.args...)
}

// startServes starts n serve processes.
func (c *chainRun) startServes(n int) {
	c.t.Helper()
	for range n {
		p, api := c.startOne()
		c.mu.Lock()
		c.serves, c.apis = append(c.serves, p), append(c.apis, api)
		c.mu.Unlock()
	}
}

// killAServe SIGKILLs one of the serve processes and starts another.
func (c *chainRun) killAServe(rnd *rand.Rand) {
	c.t.Helper()
	c.mu.Lock()
	i := rnd.IntN(len(c.serves))
	victim := c.serves[i]
	c.mu.Unlock()
	victim.Signal(c.t, syscall.SIGKILL)
	require.Equal(c.t, -1, victim.Wait(c.t, 30*time.Second))
	p, api := c.startOne()
	c.mu.Lock()
	c.serves[i], c.apis[i] = p, api
	c.kills++
	c.mu.Unlock()
}

func (c *chainRun) stopServes() {
	c.t.Helper()
	for _, p := range c.serves {
		p.Signal(c.t, syscall.SIGTERM)
		require.Equal(c.t, 0, p.Wait(c.t, 30*time.Second))
	}
}

// postEach posts n fire-and-forget tasks to every wallet, each with call data
// of its own under its own idempotency key, to the serve processes in turn.
func (c *chainRun) postEach(n int) {
	c.t.Helper()
	for range n {
		for w := range c.wallets {
			c.postVia(w, c.n+1)
		}
	}
}

// postVia posts one task to wallet w, first to serve process api (modulo
// their number); a post that fails (its process was killed) is repeated
// against the next.
func (c *chainRun) postVia(w, api int) {
	c.t.Helper()
	c.n++
	data := make([]byte, 32)
	copy(data, "ledgerq chain run")
	binary.BigEndian.PutUint64(data[24:], uint64(c.n))
	body := fmt.Sprintf(`{"to":"%s","value":"%d","data":"0x%s"}`, cmp.Or(c.to, chainRunRecipient), c.n, hex.EncodeToString(data))
	key := fmt.Sprintf("chain-run-%d", c.n)
	var id string
	var err error
	for try := range 6 {
		c.mu.Lock()
		url := c.apis[(api+try)%len(c.apis)]
		c.mu.Unlock()
		if id, err = sendTask(url, c.token, c.names[w], key, body); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // a pause before the post is tried on the next process
	}
	require.NoError(c.t, err)
	c.ids[w] = append(c.ids[w], id)
	c.data[id] = data
}

// awaitEnded waits until every task posted so far is done or in error.
func (c *chainRun) awaitEnded(timeout time.Duration) {
	c.t.Helper()
	st, err := store.OpenPool(ctxT(c.t, 10*time.Second), c.db, 0)
	require.NoError(c.t, err)
	defer st.Close()
	eventually(c.t, timeout, "every task done or in error", func() bool {
		for w, ids := range c.ids {
			for _, id := range ids {
				task, err := st.TaskGet(ctxT(c.t, 10*time.Second), c.names[w], id)
				require.NoError(c.t, err)
				if !task.Status.Terminal() {
					return false
				}
			}
		}
		return true
	})
}

// nonces returns each wallet's nonce by its node's latest block.
func (c *chainRun) nonces() []uint64 {
	out := make([]uint64, len(c.wallets))
	for i, w := range c.wallets {
		n, err := c.nodes[i].client.NonceAt(ctxT(c.t, 10*time.Second), w, nil)
		require.NoError(c.t, err)
		out[i] = n
	}
	return out
}

// checkBlocks reads every block and checks each wallet's transactions
// against its tasks and no-ops.
func (c *chainRun) checkBlocks() {
	c.t.Helper()
	ctx := context.Background()
	st, err := store.OpenPool(ctxT(c.t, 10*time.Second), c.db, 0)
	require.NoError(c.t, err)
	defer st.Close()
	done, failed, noops, reorged := 0, 0, 0, 0
	for w, addr := range c.wallets {
		mined, err := testgeth.MinedFrom(ctx, c.nodes[w].url, addr)
		require.NoError(c.t, err)
		require.NoError(c.t, testgeth.CheckNonces(mined), "wallet %s", addr.Hex())
		require.NotEmpty(c.t, mined)
		require.Zero(c.t, mined[0].Nonce)
		byHash, err := testgeth.ByHash(mined)
		require.NoError(c.t, err)
		explained := map[common.Hash]bool{}
		for _, id := range c.ids[w] {
			task, err := st.TaskGet(ctx, c.names[w], id)
			require.NoError(c.t, err)
			var withData []testgeth.MinedTx
			for _, tx := range mined {
				if bytes.Equal(tx.Data, c.data[id]) {
					withData = append(withData, tx)
				}
			}
			reorged += task.Reorgs
			switch task.Status {
			case store.TaskDone:
				done++
				require.Len(c.t, withData, 1, "task %s of %s: its call data is mined exactly once", id, addr.Hex())
				require.Equal(c.t, withData[0].Hash, common.HexToHash(task.TxHash), "task %s is done with the hash the chain has", id)
				explained[withData[0].Hash] = true
			case store.TaskError:
				failed++
				require.Empty(c.t, withData, "task %s ended in error (%s) but its transaction is mined", id, task.Error)
			default:
				c.t.Fatalf("task %s is still %s", id, task.Status)
			}
		}
		rows, err := st.Conns().Query(ctx, `SELECT tx_hash FROM ledgerq.tx_attempts WHERE chain_id = $1 AND sender = $2 AND task_id IS NULL`, c.nodes[w].chainID, strings.ToLower(addr.Hex()))
		require.NoError(c.t, err)
		for rows.Next() {
			var h string
			require.NoError(c.t, rows.Scan(&h))
			if tx, ok := byHash[common.HexToHash(h)]; ok {
				require.Equal(c.t, addr, *tx.To, "a no-op is a transfer to the wallet itself")
				explained[tx.Hash] = true
				noops++
			}
		}
		require.NoError(c.t, rows.Err())
		for _, tx := range mined {
			require.True(c.t, explained[tx.Hash], "mined transaction %s of %s at nonce %d is no task's and no no-op's", tx.Hash.Hex(), addr.Hex(), tx.Nonce)
		}
		rep := auditWallet(c.t, c.db, c.nodes[w].url, addr)
		require.Len(c.t, mined, rep.Transactions, "wallet %s: the audit reads what the scan read", addr.Hex())
	}
	faults := ""
	if c.faults != "" {
		faults = ", " + c.faults
	}
	c.t.Logf("%d tasks on %d wallets: %d done, %d in error, each mined once by the chain's own blocks; %d no-ops mined; %d serve SIGKILLs%s; %d reorged task transactions sent again",
		c.n, len(c.wallets), done, failed, noops, c.kills, faults, reorged)
}
