package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/testproc"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// walletE2E is a wallet lane under test: one keystore wallet "w" funded on a
// real geth --dev chain, served by ledgerq serve processes the test starts
// and kills.
type walletE2E struct {
	t         *testing.T
	geth      *testgeth.Node
	db        string
	dir       string
	args      []string
	sender    common.Address
	token     string
	taskIDs   []string
	recipient common.Address
}

func newWalletE2E(t *testing.T, opts ...testgeth.Option) *walletE2E {
	t.Helper()
	g := testgeth.Start(t, opts...)
	e := &walletE2E{t: t, geth: g, db: testdb.New(t).URL, dir: t.TempDir(),
		recipient: common.HexToAddress("0x000000000000000000000000000000000000dEaD")}
	addr, file, passFile := newKeystoreWallet(t, e.dir, "e2e wallet passphrase")
	e.sender = common.Address(addr)
	g.Fund(t, e.sender, new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18)))
	e.args = []string{"serve", "--batch-ledger", "sim",
		"--wallet-keystore", "w=" + file, "--wallet-passphrase-file", passFile,
		"--wallet-ledger", "evm", "--wallet-ledger-url", g.URL, "--wallet-ledger-timeout", "1s", "--wallet-cycle-budget", "500ms",
		"--wallet-follow-interval", "200ms", "--poll-interval", "200ms",
		"--shard-lease", "4s", "--wallet-replaced-after", "5s", "--shutdown-timeout", "5s"}
	return e
}

// start runs one serve process; crashAt arms a crash point (LEDGERQ_CRASH_AT).
func (e *walletE2E) start(crashAt string) (*testproc.Proc, string) {
	e.t.Helper()
	env := []string{"DATABASE_URL=" + e.db}
	if crashAt != "" {
		env = append(env, "LEDGERQ_CRASH_AT="+crashAt)
	}
	p, api := testproc.StartReady(e.t, e.dir, env, e.args...)
	if e.token == "" {
		st, err := store.OpenPool(ctxT(e.t, 10*time.Second), e.db, 0)
		require.NoError(e.t, err)
		_, e.token, err = st.APIKeyCreate(ctxT(e.t, 10*time.Second), store.APIKeyCreateParams{Now: time.Now(), Name: "e2e", Scopes: store.WalletScopes("w")})
		st.Close()
		require.NoError(e.t, err)
	}
	return p, api
}

// post enqueues n fire-and-forget tasks, each under its own idempotency
// key, and remembers their ids. A process that dies mid-request is expected
// (crash points): such a post is repeated against api2, and the key makes
// the repeat the same task.
func (e *walletE2E) post(api string, n int, retryAPI func() string) {
	e.t.Helper()
	for range n {
		i := len(e.taskIDs)
		body := fmt.Sprintf(`{"to":%q,"value":"%d"}`, e.recipient.Hex(), i+1)
		key := fmt.Sprintf("e2e-task-%d", i)
		id, err := e.send(api, key, body)
		for try := 0; err != nil && retryAPI != nil && try < 3; try++ {
			api = retryAPI()
			id, err = e.send(api, key, body)
		}
		require.NoError(e.t, err)
		e.taskIDs = append(e.taskIDs, id)
	}
}

func (e *walletE2E) send(api, key, body string) (string, error) {
	return sendTask(api, e.token, "w", key, body)
}

// sendTask posts a fire-and-forget send-tx of wallet under an idempotency
// key and returns the task's id.
func sendTask(api, token, wallet, key, body string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, api+"/v1/wallets/"+wallet+"/send-tx?task=true", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Task.ID == "" {
		return "", fmt.Errorf("send-tx answered %d: %v", resp.StatusCode, err)
	}
	return out.Task.ID, nil
}

type e2eTask struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	TxHash string `json:"tx_hash"`
	Error  string `json:"error"`
	Bumps  int    `json:"bumps"`
}

func (e *walletE2E) task(api, id string) e2eTask {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, api+"/v1/wallets/w/tasks/"+id, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var out struct {
		Task e2eTask `json:"task"`
	}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Task
}

// awaitDone waits until every task posted so far is done.
func (e *walletE2E) awaitDone(api string, timeout time.Duration) map[string]e2eTask {
	e.t.Helper()
	tasks := map[string]e2eTask{}
	eventually(e.t, timeout, "every task done", func() bool {
		for _, id := range e.taskIDs {
			if tasks[id].Status == "done" {
				continue
			}
			task := e.task(api, id)
			require.NotEqual(e.t, "error", task.Status, "task %s ended in error: %s", id, task.Error)
			tasks[id] = task
			if task.Status != "done" {
				return false
			}
		}
		return true
	})
	return tasks
}

// checkChain reads the chain with go-ethereum's ethclient, as a client of
// the chain would: one transaction per nonce from 0 with no gap, one per
// task, each the task's recorded hash, none twice.
func (e *walletE2E) checkChain(tasks map[string]e2eTask) {
	e.t.Helper()
	mined, err := testgeth.MinedFrom(context.Background(), e.geth.URL, e.sender)
	require.NoError(e.t, err)
	require.NoError(e.t, testgeth.CheckNonces(mined), "nonces on the chain")
	byHash, err := testgeth.ByHash(mined)
	require.NoError(e.t, err)
	require.Len(e.t, mined, len(e.taskIDs), "one mined transaction per task")
	require.Equal(e.t, uint64(0), mined[0].Nonce)
	seen := map[common.Hash]string{}
	for _, id := range e.taskIDs {
		h := common.HexToHash(tasks[id].TxHash)
		tx, ok := byHash[h]
		require.True(e.t, ok, "task %s's transaction %s is on the chain", id, h.Hex())
		require.Equal(e.t, uint64(1), tx.Status, "task %s's transaction succeeded", id)
		require.Empty(e.t, seen[h], "tasks %s and %s have one transaction", seen[h], id)
		seen[h] = id
	}
	rep := auditWallet(e.t, e.db, e.geth.URL, e.sender)
	require.Equal(e.t, len(e.taskIDs), rep.DoneChecked, "every task done with a hash the chain has")
	require.Equal(e.t, len(mined), rep.TaskTxs+rep.Bumps, "every transaction on the chain a task's")
}

func (e *walletE2E) died(p *testproc.Proc, point string) {
	e.t.Helper()
	require.Equal(e.t, -1, p.Wait(e.t, 90*time.Second), "the process died of SIGKILL at %s", point)
	require.Contains(e.t, p.Stderr.String(), "crash point "+point+" reached")
}

func (e *walletE2E) stop(p *testproc.Proc) {
	e.t.Helper()
	p.Signal(e.t, syscall.SIGTERM)
	require.Equal(e.t, 0, p.Wait(e.t, 30*time.Second))
}

// TestE2E_WalletLaneOnGethKilledAtEachCrashPointSendsEveryTaskOnce: ledgerq
// serve is SIGKILLed (a) after the attempts are stored and before they are
// broadcast, (b) after a broadcast and before its result is recorded, (c)
// after the receipts are found and before the confirmation is recorded, and
// then at random moments; after each restart every task ends done, and the
// real chain holds exactly one transaction per task and per nonce, nonces
// contiguous from 0.
func TestE2E_WalletLaneOnGethKilledAtEachCrashPointSendsEveryTaskOnce(t *testing.T) {
	t.Parallel()
	e := newWalletE2E(t)
	var tasks map[string]e2eTask
	for _, point := range []string{wallet.CrashStored, wallet.CrashBroadcast, wallet.CrashMined} {
		victim, api := e.start(point)
		// Posts that reach the victim after it died go to a fresh process.
		var fresh *testproc.Proc
		failover := func() string {
			if fresh == nil {
				fresh, api = e.start("")
			}
			return api
		}
		e.post(api, 5, failover)
		e.died(victim, point)
		api = failover()
		tasks = e.awaitDone(api, 2*time.Minute)
		t.Logf("crash point %s: the process died there; after a restart %d tasks are done", point, len(tasks))
		e.stop(fresh)
	}
	// Kills at random moments while tasks stream in.
	for round := range 3 {
		victim, api := e.start("")
		e.post(api, 5, nil)
		time.Sleep(time.Duration(300+round*400) * time.Millisecond) // the kill lands at another moment of the stream each round
		victim.Signal(t, syscall.SIGKILL)
		require.Equal(t, -1, victim.Wait(t, 30*time.Second))
	}
	p, api := e.start("")
	tasks = e.awaitDone(api, 2*time.Minute)
	e.stop(p)
	e.checkChain(tasks)
	t.Logf("%d tasks, %d SIGKILLs (3 at crash points, 3 at random): the chain holds one transaction per task, nonces 0..%d contiguous",
		len(e.taskIDs), 6, len(e.taskIDs)-1)
}
