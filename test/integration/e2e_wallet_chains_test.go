package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// TestE2E_WalletLaneOnTwoChainsInOneProcessSendsEveryTaskOnceOnItsOwnChain
// is the wallet lane on two chains at once: geth --dev (1337) and anvil
// (31337), each declared with --wallet-chain and two nodes, each node a
// fault proxy in front of the chain's one real node; two wallets on each
// chain, one key a wallet on both (as teams do); two `serve` processes.
// While ~40 tasks a wallet are posted over REST, a serve process is
// SIGKILLed twice, one node of each chain goes down for ~10 s (its proxy
// stops) and comes back, and the real anvil is SIGKILLed and restarted
// (losing its pool, and the blocks since its last state dump).
//
// The verdict is each chain's, read from the real nodes: every task done,
// none in error, each task's transaction mined exactly once with the hash
// the task records, nonces contiguous, every transaction explained, `ledgerq
// wallet audit` without exception on each wallet; each done task's hash on
// its own chain and not on the other, and no task's call data mined on the
// other chain by the key the two wallets share. GET /v1/chains lists both
// chains with two nodes each, and shows a stopped node not healthy while it
// is down. A task seen done and later not is a problem unless its block was
// one anvil lost when it was killed.
//
// LEDGERQ_E2E_WALLET_TASKS sets the tasks per wallet (default 40);
// LEDGERQ_E2E_FAULT_SEED the random choices.
func TestE2E_WalletLaneOnTwoChainsInOneProcessSendsEveryTaskOnceOnItsOwnChain(t *testing.T) {
	t.Parallel()
	perWallet := envInt(t, "LEDGERQ_E2E_WALLET_TASKS", 40)
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(uint64(seed), 2))
	g := testgeth.Start(t)
	a := testanvil.Start(t)
	gn, an := gethNode(g), anvilNode(a)
	gn.chain, an.chain = "devgeth", "anvil"
	gp, ap := nodeProxies(t, g.URL, 2), nodeProxies(t, a.URL, 2)
	c := newEmptyChainRun(t, "--wallet-chain", chainDecl(gn, gp, 0), "--wallet-chain", chainDecl(an, ap, 0))
	keys := make([]common.Address, 3)
	files := make([]string, 3)
	for i := range keys {
		addr, file, _ := newKeystoreWallet(t, c.dir, chainRunPassphrase)
		keys[i], files[i] = common.Address(addr), file
	}
	// Key 0 is a wallet on both chains.
	c.addWallet("g0", gn, keys[0], files[0])
	c.addWallet("g1", gn, keys[1], files[1])
	c.addWallet("a0", an, keys[0], files[0])
	c.addWallet("a1", an, keys[2], files[2])
	c.createKey()
	r := newProviderRunOf(c)
	readKey := createReadKey(t, c.db)
	r.startServes(2)
	r.watchStatuses()

	// Both chains, with their two nodes each.
	chains := r.chainStatuses(readKey)
	require.Len(t, chains, 2, "GET /v1/chains: %+v", chains)
	for _, want := range []struct {
		n       *testNode
		proxies []*faultproxy.Proxy
	}{{gn, gp}, {an, ap}} {
		ch, ok := findChain(chains, want.n.chain)
		require.True(t, ok, "GET /v1/chains lists %s: %+v", want.n.chain, chains)
		require.Equal(t, want.n.chainID, ch.ChainID)
		require.Len(t, ch.Nodes, 2, "chain %s", ch.Name)
		for _, p := range want.proxies {
			_, ok := findNode(ch, p.URL())
			require.True(t, ok, "chain %s lists its node %s: %+v", ch.Name, p.URL(), ch.Nodes)
		}
	}

	third := perWallet / 4
	r.postEach(third)
	time.Sleep(time.Duration(1000+rnd.IntN(3000)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
	r.killAServe(rnd)

	// One node of each chain goes down for ~10 s.
	r.postEach(third)
	down := map[string]string{gn.chain: gp[0].URL(), an.chain: ap[0].URL()}
	gp[0].Stop()
	ap[0].Stop()
	stopped := time.Now()
	r.postEach(2)
	// The nodes stay down for 10 s: the fault is the point.
	seenDown := r.nodeStatesUntil(readKey, down, stopped.Add(10*time.Second))
	for _, p := range []*faultproxy.Proxy{gp[0], ap[0]} {
		_, err := p.Start()
		require.NoError(t, err)
	}
	seenBack := r.awaitNodeStates(readKey, down, func(s string) bool { return s == evmnodes.NodeHealthy }, 20*time.Second)
	t.Logf("while stopped for 10 s, the nodes were shown %v; after, %v", seenDown, seenBack)
	for chain, url := range down {
		if !slices.ContainsFunc(seenDown[chain], func(s string) bool { return !strings.HasPrefix(s, evmnodes.NodeHealthy) }) {
			r.problem("chain %s: its node %s was stopped for 10 s and GET /v1/chains never showed it not healthy (%v)", chain, url, seenDown[chain])
		}
		if seenBack[chain] == "" {
			r.problem("chain %s: its node %s was not shown healthy within 20 s of coming back", chain, url)
		}
	}

	// The real anvil is SIGKILLed and restarted; the blocks it held since
	// its last state dump are lost, and with them the transactions in them.
	r.postEach(third)
	time.Sleep(time.Duration(500+rnd.IntN(2000)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
	headBefore := a.Head(t)
	recent, _, _ := lastBlocks(t, an, headBefore, min(headBefore, 8), r.walletsOn(an))
	killed := time.Now()
	a.Kill()
	time.Sleep(3 * time.Second) // anvil stays down this long: the fault is the point
	headAfter := a.Restart(t)
	lost := map[common.Hash]uint64{}
	for h, block := range recent {
		if block > headAfter {
			lost[h] = block
		}
	}
	t.Logf("anvil SIGKILLed at head %d, restarted at head %d: %d transactions of its wallets lost with their blocks", headBefore, headAfter, len(lost))
	r.explainDoneThenNot = func(seen seenTask) (string, bool) {
		if block, ok := lost[common.HexToHash(seen.hash)]; ok && r.nodes[seen.w] == an && seen.at.After(killed) {
			return fmt.Sprintf("its block %d was lost when anvil was killed (it came back at head %d)", block, headAfter), true
		}
		return "", false
	}

	r.postEach(2)
	time.Sleep(time.Duration(500+rnd.IntN(2000)) * time.Millisecond) // the kill lands at a random moment: the chaos is the point
	r.killAServe(rnd)
	r.postEach(perWallet - 3*third - 4)
	if !r.awaitEndedOr(2 * time.Minute) {
		r.problem("not every task ended within 2 minutes of the last post")
	}
	r.stopWatch()
	r.stopServes()

	v := r.checkChain()
	// Each wallet's tasks are on its own chain only.
	other := map[*testNode]*testNode{gn: an, an: gn}
	tasksOnOther := 0
	for w, addr := range r.wallets {
		o := other[r.nodes[w]]
		minedThere, err := testgeth.MinedFrom(context.Background(), o.url, addr)
		require.NoError(t, err)
		tasks := r.tasks(w)
		for _, id := range r.ids[w] {
			task := tasks[id]
			if task.Status == store.TaskDone {
				_, _, err := o.client.TransactionByHash(ctxT(t, 10*time.Second), common.HexToHash(task.TxHash))
				if !errors.Is(err, ethereum.NotFound) {
					r.problem("task %s of %s is done with %s, which chain %s holds too (%v)", id, r.names[w], task.TxHash, o.chain, err)
				}
			}
			for _, tx := range minedThere {
				if bytes.Equal(tx.Data, r.data[id]) {
					tasksOnOther++
					r.problem("task %s of %s (chain %s) is mined on chain %s in %s", id, r.names[w], r.nodes[w].chain, o.chain, tx.Hash.Hex())
				}
			}
		}
	}
	perChain := map[string]int{}
	for w, txs := range v.mined {
		perChain[r.nodes[w].chain] += len(txs)
	}
	t.Logf("%d tasks on 4 wallets over 2 chains: transactions mined %v; %d tasks mined on the other chain; proxy counts geth %v %v, anvil %v %v",
		r.n, perChain, tasksOnOther, gp[0].Counts(), gp[1].Counts(), ap[0].Counts(), ap[1].Counts())
	r.report()
}

// TestE2E_WalletLaneOnAnvilThroughAReorgAndAPoolLossSendsEveryTaskOnce runs
// two wallets on anvil (a block a second, its chain declared with
// confirmations=3) and two `serve` processes while tasks stream in, and
// throws anvil's own faults at the lane: a reorganisation of depth 2
// (anvil_reorg, no transaction in the new blocks: the wallets'
// transactions mined in the last two blocks leave the chain and the pool
// does not get them back), the pool's loss (anvil_dropAllTransactions,
// while mining is paused so that it holds the wallets' transactions), and
// a reorganisation of depth 3. Mining pauses for 2 s before each
// reorganisation, so that the lane has followed the blocks it replaces.
//
// The lane must send again what left the chain and what the pool lost, the
// same bytes or a gas bump: every task done, none in error, each task's
// transaction mined exactly once on the final chain, nonces contiguous,
// every transaction explained, `ledgerq wallet audit` without exception.
// With 3 confirmations (the mining block counting as one) a task is done
// when its block is 3 deep: the depth-2 reorganisation takes back only
// mined-not-done transactions, so a task seen done and later not is a
// problem unless its block was one the depth-3 reorganisation replaced.
func TestE2E_WalletLaneOnAnvilThroughAReorgAndAPoolLossSendsEveryTaskOnce(t *testing.T) {
	t.Parallel()
	const confirmations = 3
	a := testanvil.Start(t)
	an := anvilNode(a)
	an.chain = "anvil"
	c := newEmptyChainRun(t, "--wallet-chain", fmt.Sprintf("name=%s,chain-id=%d,node=%s,confirmations=%d", an.chain, an.chainID, an.url, confirmations))
	for i := range 2 {
		addr, file, _ := newKeystoreWallet(t, c.dir, chainRunPassphrase)
		c.addWallet(fmt.Sprintf("w%d", i), an, common.Address(addr), file)
	}
	c.createKey()
	r := newProviderRunOf(c)
	r.startServes(2)
	r.watchStatuses()

	r.postEach(10)
	// Each with the lane given 2 s on the head first: the deepest block of
	// the depth-2 reorganisation is 2 deep then, its transactions not done
	// yet; the depth-3 one's are 3 deep, their tasks done.
	shallow, _ := r.reorgWhileSending(a, an, 2, 2*time.Second)
	r.postEach(5)
	dropped := r.dropPoolWhileSending(a)
	r.postEach(5)
	deep, deepAt := r.reorgWhileSending(a, an, confirmations, 2*time.Second)
	r.explainDoneThenNot = func(seen seenTask) (string, bool) {
		if block, ok := deep[common.HexToHash(seen.hash)]; ok && seen.at.After(deepAt) {
			return fmt.Sprintf("its block %d was one of the %d the depth-%d reorganisation replaced (%d confirmations)", block, confirmations, confirmations, confirmations), true
		}
		return "", false
	}
	r.postEach(5)
	if !r.awaitEndedOr(90 * time.Second) {
		r.problem("not every task ended within 90 s of the last post")
	}
	r.stopWatch()
	r.stopServes()
	v := r.checkChain()
	// What left the chain is back with the same bytes, or its task is
	// mined in a bump of it (checkChain holds every task to one mined
	// transaction).
	same := 0
	for _, gone := range []map[common.Hash]uint64{shallow, deep} {
		for h := range gone {
			for _, txs := range v.onChain {
				if _, ok := txs[h]; ok {
					same++
				}
			}
		}
	}
	t.Logf("%d tasks on 2 wallets; the reorganisation of depth 2 took %d of their transactions off the chain, the one of depth %d %d, and %d of these %d are back with the same bytes (the others' tasks in a bump); the pool lost %d",
		r.n, len(shallow), confirmations, len(deep), same, len(shallow)+len(deep), dropped)
	r.report()
}

// TestE2E_WalletLaneOnAnvilBehindAFaultyProviderSendsEveryTaskOnceAndNeverTakesBackDone
// is TestE2E_WalletLaneBehindAFaultyProvider… with anvil behind the fault
// proxy instead of geth, and a shorter run: 3 wallets, 2 serve processes,
// ~100 tasks (12 a wallet fault-free, then 21 a wallet under providerMix
// for 40 s while a serve process is SIGKILLed 3 times, then 1 a wallet), and
// the same verdict, `ledgerq wallet audit` included.
func TestE2E_WalletLaneOnAnvilBehindAFaultyProviderSendsEveryTaskOnceAndNeverTakesBackDone(t *testing.T) {
	// Not parallel: its measure of throughput under faults against a
	// fault-free baseline wants the machine to itself, so it runs before
	// the package's parallel tests start.
	a := testanvil.Start(t)
	runProviderFaults(t, newProviderRun(t, anvilNode(a), 3), providerLoad{baseEach: 12, faultEach: 7, faultWindow: 40 * time.Second})
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return v
}

// nodeProxies starts n fault proxies (faultless) in front of the node at
// url: n nodes of one chain, each of which can go down on its own.
func nodeProxies(t *testing.T, url string, n int) []*faultproxy.Proxy {
	t.Helper()
	out := make([]*faultproxy.Proxy, n)
	for i := range out {
		p, err := faultproxy.New(url, faultproxy.Config{})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		_, err = p.Start()
		require.NoError(t, err)
		out[i] = p
	}
	return out
}

// chainDecl is n's chain as --wallet-chain declares it, with the proxies
// as its nodes and confirmations when not 0.
func chainDecl(n *testNode, proxies []*faultproxy.Proxy, confirmations int) string {
	d := fmt.Sprintf("name=%s,chain-id=%d", n.chain, n.chainID)
	for _, p := range proxies {
		d += ",node=" + p.URL()
	}
	if confirmations > 0 {
		d += fmt.Sprintf(",confirmations=%d", confirmations)
	}
	return d
}

// createReadKey makes an API key with the read scope (GET /v1/chains).
func createReadKey(t *testing.T, db string) string {
	t.Helper()
	st, err := store.OpenPool(ctxT(t, 10*time.Second), db, 0)
	require.NoError(t, err)
	defer st.Close()
	_, key, err := st.APIKeyCreate(ctxT(t, 10*time.Second), store.APIKeyCreateParams{Now: time.Now(), Name: "chains reader", Scopes: []store.Scope{store.ScopeRead}})
	require.NoError(t, err)
	return key
}

// chainStatuses is GET /v1/chains from the first serve process.
func (r *providerRun) chainStatuses(key string) []evmnodes.ChainStatus {
	r.t.Helper()
	r.mu.Lock()
	api := r.apis[0]
	r.mu.Unlock()
	req, err := http.NewRequest(http.MethodGet, api+"/v1/chains", nil)
	require.NoError(r.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	require.Equal(r.t, http.StatusOK, resp.StatusCode)
	var out struct {
		Chains []evmnodes.ChainStatus `json:"chains"`
	}
	require.NoError(r.t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Chains
}

func findChain(chains []evmnodes.ChainStatus, name string) (evmnodes.ChainStatus, bool) {
	for _, ch := range chains {
		if ch.Name == name {
			return ch, true
		}
	}
	return evmnodes.ChainStatus{}, false
}

func findNode(ch evmnodes.ChainStatus, url string) (evmnodes.NodeStatus, bool) {
	for _, n := range ch.Nodes {
		if n.URL == url {
			return n, true
		}
	}
	return evmnodes.NodeStatus{}, false
}

// nodeStatesUntil polls GET /v1/chains until the time until and returns
// the states the node of each chain in nodes (chain name → node URL) was
// shown in, in order, each with its last error when not healthy.
func (r *providerRun) nodeStatesUntil(key string, nodes map[string]string, until time.Time) map[string][]string {
	r.t.Helper()
	seen := map[string][]string{}
	for time.Now().Before(until) {
		chains := r.chainStatuses(key)
		for chain, url := range nodes {
			ch, found := findChain(chains, chain)
			require.True(r.t, found, "GET /v1/chains lists %s", chain)
			n, found := findNode(ch, url)
			require.True(r.t, found, "chain %s lists its node %s", chain, url)
			state := n.State
			if n.State != evmnodes.NodeHealthy && n.LastError != "" {
				state += " (" + n.LastError + ")"
			}
			if l := seen[chain]; len(l) == 0 || l[len(l)-1] != state {
				seen[chain] = append(l, state)
			}
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of this watch
	}
	return seen
}

// awaitNodeStates polls GET /v1/chains until the node of each chain in
// nodes (chain name → node URL) is shown in a state that ok takes, for at
// most timeout, and returns the first such state of each ("" for none).
func (r *providerRun) awaitNodeStates(key string, nodes map[string]string, ok func(string) bool, timeout time.Duration) map[string]string {
	r.t.Helper()
	seen := map[string]string{}
	deadline := time.Now().Add(timeout)
	for len(seen) < len(nodes) && time.Now().Before(deadline) {
		chains := r.chainStatuses(key)
		for chain, url := range nodes {
			if seen[chain] != "" {
				continue
			}
			ch, found := findChain(chains, chain)
			require.True(r.t, found, "GET /v1/chains lists %s", chain)
			n, found := findNode(ch, url)
			require.True(r.t, found, "chain %s lists its node %s", chain, url)
			if ok(n.State) {
				seen[chain] = n.State
				if n.State != evmnodes.NodeHealthy && n.LastError != "" {
					seen[chain] += " (" + n.LastError + ")"
				}
			}
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of this wait on a condition
	}
	return seen
}

// walletsOn are the addresses of the wallets on n's chain.
func (r *providerRun) walletsOn(n *testNode) map[common.Address]bool {
	out := map[common.Address]bool{}
	for w, addr := range r.wallets {
		if r.nodes[w] == n {
			out[addr] = true
		}
	}
	return out
}

// blockTxs are the hashes of the transactions of senders in n's block num.
func blockTxs(t *testing.T, n *testNode, num uint64, senders map[common.Address]bool) []common.Hash {
	t.Helper()
	b, err := n.client.BlockByNumber(ctxT(t, 10*time.Second), new(big.Int).SetUint64(num))
	require.NoError(t, err)
	signer := types.LatestSignerForChainID(big.NewInt(n.chainID))
	var out []common.Hash
	for _, tx := range b.Transactions() {
		from, err := types.Sender(signer, tx)
		require.NoError(t, err)
		if senders[from] {
			out = append(out, tx.Hash())
		}
	}
	return out
}

// reorgWhileSending posts a task to each wallet after each new block until
// the node's last depth blocks all hold transactions of the wallets; then
// it pauses mining, leaves the lane settle to follow that head, replaces
// those blocks with as many empty ones (anvil_reorg), mines again, and
// returns the wallets' transactions that left the chain with them, by
// hash, with their old block, and when it was made. It fails the test when
// the blocks never fill.
func (r *providerRun) reorgWhileSending(a *testanvil.Node, n *testNode, depth uint64, settle time.Duration) (map[common.Hash]uint64, time.Time) {
	r.t.Helper()
	senders := r.walletsOn(n)
	deadline := time.Now().Add(45 * time.Second)
	last := a.Head(r.t)
	for {
		require.True(r.t, time.Now().Before(deadline), "the last %d blocks never all held the wallets' transactions", depth)
		last = a.WaitHead(r.t, last+1)
		if _, _, full := lastBlocks(r.t, n, last, depth, senders); !full {
			r.postEach(1)
			continue
		}
		setIntervalMining(r.t, a, 0)
		head := a.Head(r.t) // a block may have come before the pause
		gone, hashes, full := lastBlocks(r.t, n, head, depth, senders)
		if !full {
			setIntervalMining(r.t, a, a.BlockTime)
			continue
		}
		time.Sleep(settle) // the lane follows the head meanwhile: what it makes of these blocks is the point
		at := time.Now()
		a.Reorg(r.t, depth)
		setIntervalMining(r.t, a, a.BlockTime)
		for num, h := range hashes {
			b, err := n.client.HeaderByNumber(ctxT(r.t, 10*time.Second), new(big.Int).SetUint64(num))
			require.NoError(r.t, err)
			require.NotEqual(r.t, h, b.Hash(), "anvil_reorg of depth %d at head %d replaced block %d", depth, head, num)
		}
		r.t.Logf("anvil_reorg of depth %d at head %d, %s after the head: %d transactions of the wallets left the chain", depth, head, settle, len(gone))
		return gone, at
	}
}

// lastBlocks reads n's blocks head-depth+1 to head: the transactions of
// senders in them, by hash, with their block; the blocks' hashes; whether
// each holds one.
func lastBlocks(t *testing.T, n *testNode, head, depth uint64, senders map[common.Address]bool) (map[common.Hash]uint64, map[uint64]common.Hash, bool) {
	t.Helper()
	txs, hashes, full := map[common.Hash]uint64{}, map[uint64]common.Hash{}, true
	for num := head - depth + 1; num <= head; num++ {
		in := blockTxs(t, n, num, senders)
		full = full && len(in) > 0
		for _, h := range in {
			txs[h] = num
		}
		b, err := n.client.HeaderByNumber(ctxT(t, 10*time.Second), new(big.Int).SetUint64(num))
		require.NoError(t, err)
		hashes[num] = b.Hash()
	}
	return txs, hashes, full
}

// setIntervalMining makes anvil mine a block every d (0: none until
// evm_mine or a later call).
func setIntervalMining(t *testing.T, a *testanvil.Node, d time.Duration) {
	t.Helper()
	require.NoError(t, a.RPC().CallContext(ctxT(t, 10*time.Second), nil, "evm_setIntervalMining", int(d.Seconds())))
}

// dropPoolWhileSending pauses anvil's mining, posts a task to each wallet
// until the pool holds transactions of every wallet, empties the pool
// (anvil_dropAllTransactions) and mines again, and returns how many of the
// wallets' transactions the pool lost.
func (r *providerRun) dropPoolWhileSending(a *testanvil.Node) int {
	r.t.Helper()
	setIntervalMining(r.t, a, 0)
	var pooled int
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(r.t, time.Now().Before(deadline), "the pool never held transactions of every wallet")
		r.postEach(1)
		time.Sleep(time.Second) // a second for the lane to send: the sends are what the pool should hold
		latest, pending := r.nonces(), r.pendingNonces()
		pooled = 0
		every := true
		for i := range latest {
			every = every && pending[i] > latest[i]
			pooled += int(pending[i] - latest[i])
		}
		if every {
			break
		}
	}
	a.DropAllTransactions(r.t)
	latest, pending := r.nonces(), r.pendingNonces()
	for i := range latest {
		require.Equal(r.t, latest[i], pending[i], "the pool still holds transactions of %s after anvil_dropAllTransactions", r.names[i])
	}
	setIntervalMining(r.t, a, a.BlockTime)
	r.t.Logf("anvil_dropAllTransactions emptied a pool holding %d transactions of the wallets", pooled)
	return pooled
}
