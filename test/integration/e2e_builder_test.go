package integration

// End-to-end test of the builder lane (jamduna's EVM builder): two `serve`
// processes on one database, a simulated JAM chain in its own process
// (`simledger --kind jam`) with its faults on, and go-ethereum's ethclient —
// not ledgerq's code — as the client. The chain's execution log is the
// witness: every accepted transaction executed exactly once, in nonce order
// per sender, replaced ones never, each block number once.

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// jamExecution is one entry of the simulated JAM chain's GET /debug/log.
type jamExecution struct {
	Number      uint64   `json:"number"`
	Version     int      `json:"version"`
	PackageHash string   `json:"package_hash"`
	TxHashes    []string `json:"tx_hashes"`
	Refused     string   `json:"refused"`
	// Skipped are transactions the EVM refused: in the package, not run.
	Skipped []struct {
		Hash   string `json:"hash"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

type jamLog struct {
	Executions []jamExecution `json:"executions"`
	Refusals   []jamExecution `json:"refusals"`
}

// builderSender is one key of the workload and what it expects executed.
type builderSender struct {
	key  *ecdsa.PrivateKey
	addr common.Address
	// want is, by nonce, the hash that must execute; replaced hashes must not.
	want     map[uint64]string
	replaced []string
}

const builderChainID = 1337

func signBuilderTx(t *testing.T, key *ecdsa.PrivateKey, nonce uint64, tipGwei float64) *types.Transaction {
	t.Helper()
	id := big.NewInt(builderChainID)
	tip := new(big.Int).SetUint64(uint64(tipGwei * 1e9))
	to := common.HexToAddress("0x00000000000000000000000000000000000e2e00")
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Mul(tip, big.NewInt(2)), Gas: 21_000, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	return tx
}

// sendWithRetry sends tx through cl; a full pool or sender, or a process
// that is down, is retried (on the other endpoint).
func sendWithRetry(t *testing.T, clients []*ethclient.Client, i int, tx *types.Transaction) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := clients[i%len(clients)].SendTransaction(ctx, tx)
		cancel()
		if err == nil || strings.HasPrefix(err.Error(), "already known") {
			return
		}
		require.True(t, time.Now().Before(deadline), "sending %s: %v", tx.Hash().Hex(), err)
		i++
		time.Sleep(50 * time.Millisecond) // a pause before the send is tried again, on the other endpoint
	}
}

func TestE2E_BuilderLaneTwoServeProcessesOnAFaultyJAMChainExecuteEveryTransactionOnce(t *testing.T) {
	dbURL := testdb.New(t).URL
	addr := testproc.FreeAddr(t)
	chain := testproc.Start(t, t.TempDir(), nil, "simledger", "--kind", "jam", "--addr", addr, "--log-level", "warn",
		"--jam-slot-length", "400ms", "--sim-seed", "7",
		"--jam-no-guarantee-rate", "0.1", "--jam-late-guarantee-rate", "0.1", "--jam-late-slots", "4",
		"--jam-lost-rate", "0.1", "--jam-transient-rate", "0.1")
	jamURL := "http://" + addr
	testproc.WaitHTTP(t, chain, jamURL+"/debug/stats", http.StatusOK, time.Minute)

	serveArgs := []string{"serve", "--api-insecure-open", "--builder", "--builder-ledger", "jam", "--builder-ledger-url", jamURL,
		"--builder-chain-id", "1337", "--poll-interval", "100ms", "--builder-guarantee-timeout", "1200ms",
		"--builder-bundle-size", "8", "--builder-submit-backoff", "100ms", "--builder-submit-backoff-max", "1s", "--log-level", "info"}
	env := []string{"DATABASE_URL=" + dbURL}
	procs := make([]*testproc.Proc, 2)
	apis := make([]string, 2)
	for i := range procs {
		procs[i], apis[i] = testproc.StartReady(t, t.TempDir(), env, serveArgs...)
	}
	clients := make([]*ethclient.Client, 2)
	for i, api := range apis {
		cl, err := ethclient.Dial(api + "/rpc")
		require.NoError(t, err)
		defer cl.Close()
		clients[i] = cl
	}
	ctx := context.Background()
	id, err := clients[0].ChainID(ctx)
	require.NoError(t, err)
	require.EqualValues(t, builderChainID, id.Int64(), "eth_chainId through ethclient")

	// Each sender: nonce 1 first (queued: a gap), replaced by +10 % (the
	// first becomes replaced), an underpriced +5 % refused, then nonce 0
	// (both become pending), then nonces 2..n in order, half of them on the
	// other process.
	const senders, perSender = 8, 12
	ss := make([]*builderSender, senders)
	for i := range ss {
		key := jam.DevAccounts()[i].Key // funded by simledger's EVM
		s := &builderSender{key: key, addr: crypto.PubkeyToAddress(key.PublicKey), want: map[uint64]string{}}
		ss[i] = s
		cl := clients[i%2]
		first := signBuilderTx(t, key, 1, 2)
		require.NoError(t, cl.SendTransaction(ctx, first))
		pending, err := cl.PendingNonceAt(ctx, s.addr)
		require.NoError(t, err)
		require.EqualValues(t, 0, pending, "a gapped nonce is queued: the pending nonce stays 0")
		require.ErrorContains(t, cl.SendTransaction(ctx, signBuilderTx(t, key, 1, 2.1)), "replacement transaction underpriced", "+5 %% must be refused")
		second := signBuilderTx(t, key, 1, 2.2)
		require.NoError(t, clients[(i+1)%2].SendTransaction(ctx, second), "+10 %% replaces, through the other process")
		require.ErrorContains(t, cl.SendTransaction(ctx, second), "already known")
		s.replaced = append(s.replaced, strings.ToLower(first.Hash().Hex()))
		s.want[1] = strings.ToLower(second.Hash().Hex())
		zero := signBuilderTx(t, key, 0, 2)
		require.NoError(t, cl.SendTransaction(ctx, zero))
		s.want[0] = strings.ToLower(zero.Hash().Hex())
	}
	// The rest, senders interleaved, while one process is killed midway.
	killed := false
	for n := uint64(2); n < perSender; n++ {
		for i, s := range ss {
			tx := signBuilderTx(t, s.key, n, 2)
			sendWithRetry(t, clients, i+int(n), tx)
			s.want[n] = strings.ToLower(tx.Hash().Hex())
		}
		if n == perSender/2 && !killed {
			require.NoError(t, procs[0].Cmd.Process.Signal(syscall.SIGKILL))
			procs[0].Wait(t, 30*time.Second)
			killed = true
			t.Log("SIGKILLed one serve process midway")
		}
	}
	// Restart the killed one: its loops pick up where the database says.
	procs[0], apis[0] = testproc.StartReady(t, t.TempDir(), env, serveArgs...)

	total := senders * perSender
	var log jamLog
	require.Eventually(t, func() bool {
		log = readJAMLog(t, jamURL)
		executed := 0
		for _, e := range log.Executions {
			executed += len(e.TxHashes)
		}
		return executed >= total
	}, 3*time.Minute, 500*time.Millisecond, "every accepted transaction executed on the chain")

	count := map[string]int{}
	numbers := map[uint64]int{}
	order := map[string][]string{} // per sender, hashes in execution order
	for _, e := range log.Executions {
		numbers[e.Number]++
		for _, h := range e.TxHashes {
			count[h]++
		}
	}
	for n, c := range numbers {
		require.Equal(t, 1, c, "block number %d executed %d times", n, c)
	}
	for _, e := range log.Executions {
		require.Empty(t, e.Skipped, "block %d: the EVM refused transactions", e.Number)
	}
	byHash := map[string]string{}
	for _, s := range ss {
		for _, h := range s.want {
			byHash[h] = s.addr.Hex()
		}
	}
	for _, e := range log.Executions {
		for _, h := range e.TxHashes {
			order[byHash[h]] = append(order[byHash[h]], h)
		}
	}
	for _, s := range ss {
		for n := uint64(0); n < perSender; n++ {
			require.Equal(t, 1, count[s.want[n]], "sender %s nonce %d (%s) executed %d times", s.addr.Hex(), n, s.want[n], count[s.want[n]])
			require.Equal(t, s.want[n], order[s.addr.Hex()][n], "sender %s executed out of nonce order", s.addr.Hex())
		}
		for _, h := range s.replaced {
			require.Zero(t, count[h], "replaced transaction %s executed", h)
		}
	}
	var stats struct {
		Duplicates uint64 `json:"duplicates"`
		NonceGaps  uint64 `json:"nonce_gaps"`
		Faults     map[string]uint64
	}
	resp := getJSON(t, jamURL+"/debug/stats")
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &stats))
	require.Zero(t, stats.NonceGaps, "the chain saw no nonce out of order")
	t.Logf("chain: %d blocks executed, %d second executions refused, faults %s", len(log.Executions), stats.Duplicates, resp.Body)

	// The REST API agrees: a transaction's bundle ends finalized.
	require.Eventually(t, func() bool {
		r := getJSON(t, apis[1]+"/v1/pool/txs/"+ss[0].want[perSender-1])
		return r.StatusCode == http.StatusOK && strings.Contains(r.Body, `"bundle_state":"finalized"`)
	}, time.Minute, 200*time.Millisecond, "GET /v1/pool/txs/{hash} reports the bundle finalized")
	r := getJSON(t, apis[1]+"/v1/pool/txs/"+ss[0].replaced[0])
	require.Contains(t, r.Body, `"state":"replaced"`)
}

func readJAMLog(t *testing.T, base string) jamLog {
	t.Helper()
	resp := getJSON(t, base+"/debug/log")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var l jamLog
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &l))
	return l
}
