package node_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// The fees of the cancel and speed-up tests, wei per gas. A task offers
// taskTip, below the 5 gwei a stalling geth mines, so its transaction stays
// pending; a cancel's no-op offers what a gas bump would (20% more: 5.4
// gwei), which geth mines; a speed-up asks for speedTip.
var (
	taskTip    = big.NewInt(4_500_000_000)
	taskFeeCap = big.NewInt(20 * params.GWei)
	speedTip   = big.NewInt(6 * params.GWei)
	speedCap   = big.NewInt(30 * params.GWei)
)

// stallingChain is a real node that keeps the lane's transactions pending
// until the test lets the chain mine them.
type stallingChain struct {
	url    string
	client *ethclient.Client
	// mineReplacement has the chain mine what its pool holds once a
	// replacement offering at least the no-op's tip is there: geth mines it
	// on its own; anvil mines nothing until asked.
	mineReplacement func(t testing.TB)
	// mineStalled has the chain mine the stalled transaction as it is.
	mineStalled func(t testing.TB)
	// passBlocks lets a few blocks go by without the stalled transaction
	// (anvil makes none unless told).
	passBlocks func(t *testing.T)
	// moreBlocks makes a few more blocks.
	moreBlocks func(t *testing.T)
	waitMined  func(t testing.TB, hash common.Hash) *types.Receipt
}

// stallingChains start, for wallet w: a geth --dev whose miner takes no tip
// below 5 gwei (testgeth.Stalling), and an anvil that mines only when told
// (evm_setAutomine false).
var stallingChains = map[string]func(t *testing.T, w common.Address) stallingChain{
	"geth": func(t *testing.T, w common.Address) stallingChain {
		n := testgeth.Start(t, testgeth.Stalling())
		n.Fund(t, w, big.NewInt(params.Ether))
		return stallingChain{
			url: n.URL, client: n.Client(),
			mineReplacement: func(testing.TB) {},
			mineStalled:     func(t testing.TB) { n.SetMinerGasPrice(t, big.NewInt(1)) },
			passBlocks:      func(t *testing.T) { n.WaitHead(t, head(t, n.Client())+2) },
			moreBlocks:      func(t *testing.T) { n.WaitHead(t, head(t, n.Client())+3) },
			waitMined:       n.WaitMined,
		}
	},
	"anvil": func(t *testing.T, w common.Address) stallingChain {
		n := testanvil.Start(t, testanvil.ChainID(testgeth.DevChainID), testanvil.Automine())
		require.NoError(t, n.RPC().CallContext(t.Context(), nil, "evm_setAutomine", false))
		n.SetBalance(t, w, big.NewInt(params.Ether))
		return stallingChain{
			url: n.URL, client: n.Client(),
			mineReplacement: n.Mine,
			mineStalled:     n.Mine,
			passBlocks:      func(*testing.T) {},
			waitMined:       n.WaitMined,
			moreBlocks: func(t *testing.T) {
				for range 3 {
					n.Mine(t)
				}
			},
		}
	},
}

func head(t *testing.T, c *ethclient.Client) uint64 {
	t.Helper()
	h, err := c.BlockNumber(t.Context())
	require.NoError(t, err)
	return h
}

// sentTask is a task as the API shows it, with what these tests read.
type sentTask struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	TxHash    string `json:"tx_hash"`
	Error     string `json:"error"`
	Cancelled bool   `json:"cancelled"`
	Attempts  []struct {
		Nonce  int64  `json:"nonce"`
		TxHash string `json:"tx_hash"`
		State  string `json:"state"`
		Kind   string `json:"kind"`
	} `json:"attempts"`
}

// cancelEnv is a wallet served by a node whose lane sends through a
// stalling chain.
type cancelEnv struct {
	*walletAPI
	chain stallingChain
}

func startCancelEnv(t *testing.T, start func(*testing.T, common.Address) stallingChain) *cancelEnv {
	t.Helper()
	signer := testfactory.NewSigner(t)
	chain := start(t, common.Address(signer.Address()))
	w := startChainWalletAPI(t, signer, chain.url, func(c *node.Config) {
		// No gas bump of its own within the test: the test's requests
		// are the only replacements.
		c.Wallet.Lane.StallTimeout = time.Hour
		c.Wallet.Lane.BumpPercent = 20
	})
	return &cancelEnv{walletAPI: w, chain: chain}
}

func (e *cancelEnv) get(id string) sentTask {
	e.t.Helper()
	code, out := e.do(http.MethodGet, "/v1/wallets/w/tasks/"+id, "")
	require.Equal(e.t, http.StatusOK, code, out)
	var r struct {
		Task sentTask `json:"task"`
	}
	require.NoError(e.t, json.Unmarshal([]byte(out), &r))
	return r.Task
}

// until waits up to 30 s until cond holds of the task, and returns it.
func (e *cancelEnv) until(id, what string, cond func(sentTask) bool) sentTask {
	e.t.Helper()
	var got sentTask
	require.EventuallyWithT(e.t, func(c *assert.CollectT) {
		got = e.get(id)
		assert.True(c, cond(got), "task %s: %+v", id, got)
	}, 30*time.Second, 50*time.Millisecond, "task %s: not %s within 30 s", id, what)
	return got
}

// attemptOf is the hash of the task's attempt of the kind ("" is the
// task's own), or "".
func attemptOf(task sentTask, kind string) string {
	for _, a := range task.Attempts {
		if a.Kind == kind {
			return a.TxHash
		}
	}
	return ""
}

// stalled sends a task whose fees the chain does not mine (taskTip) and
// returns it once its transaction is in the node's pool, pending.
func (e *cancelEnv) stalled(body string) (sentTask, *types.Transaction) {
	e.t.Helper()
	id := e.send(body).ID
	task := e.until(id, "sent", func(t sentTask) bool {
		return t.Status == "executing" && len(t.Attempts) == 1 && t.Attempts[0].State == "sent"
	})
	tx := e.pending(task.Attempts[0].TxHash)
	e.chain.passBlocks(e.t)
	_, err := e.chain.client.TransactionReceipt(e.t.Context(), tx.Hash())
	require.ErrorIs(e.t, err, ethereum.NotFound, "the task's transaction stays pending")
	return task, tx
}

// pending waits until the node's pool holds the transaction and returns it.
func (e *cancelEnv) pending(hash string) *types.Transaction {
	e.t.Helper()
	var tx *types.Transaction
	require.EventuallyWithT(e.t, func(c *assert.CollectT) {
		got, isPending, err := e.chain.client.TransactionByHash(e.t.Context(), common.HexToHash(hash))
		if assert.NoError(c, err) && assert.True(c, isPending, "%s is pending", hash) {
			tx = got
		}
	}, 30*time.Second, 50*time.Millisecond, "transaction %s is not in the node's pool", hash)
	return tx
}

// walletTxsOnChain returns every transaction of the wallet the chain's
// blocks hold, read block by block.
func (e *cancelEnv) walletTxsOnChain() []*types.Transaction {
	e.t.Helper()
	ctx := e.t.Context()
	signer := types.LatestSignerForChainID(big.NewInt(testgeth.DevChainID))
	var out []*types.Transaction
	for n := range head(e.t, e.chain.client) + 1 {
		b, err := e.chain.client.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		require.NoError(e.t, err)
		for _, tx := range b.Transactions() {
			from, err := types.Sender(signer, tx)
			require.NoError(e.t, err)
			if from == e.addr {
				out = append(out, tx)
			}
		}
	}
	return out
}

func (e *cancelEnv) requireNotMined(hash string) {
	e.t.Helper()
	_, err := e.chain.client.TransactionReceipt(e.t.Context(), common.HexToHash(hash))
	require.True(e.t, errors.Is(err, ethereum.NotFound), "transaction %s has no receipt: %v", hash, err)
}

// holdShard claims the wallet's shard for the test, so the node's workers
// cannot run the wallet, and returns what releases it.
func (e *cancelEnv) holdShard() func() {
	e.t.Helper()
	var claim store.ShardClaim
	require.EventuallyWithT(e.t, func(c *assert.CollectT) {
		var err error
		claim, err = e.st.ShardClaim(e.t.Context(), store.ShardClaimParams{
			Now: time.Now(), Owner: "test", LeaseUntil: time.Now().Add(time.Minute), Kinds: []string{"wallet"},
		})
		assert.NoError(c, err)
	}, 20*time.Second, 5*time.Millisecond, "the wallet's shard was never free to hold")
	require.Equal(e.t, store.WalletShardKey(testgeth.DevChainID, strings.ToLower(e.addr.Hex())), claim.Key)
	return func() {
		_, err := e.st.ShardRelease(e.t.Context(), store.ShardReleaseParams{Now: time.Now(), Claim: claim, WorkLeft: true})
		require.NoError(e.t, err)
	}
}

const cancelTo = "0x00000000000000000000000000000000000b0b01"

func stalledBody(data string) string {
	return `{"to":"` + cancelTo + `","value":"1000","data":"` + data + `","max_fee_per_gas":"` + taskFeeCap.String() +
		`","max_priority_fee_per_gas":"` + taskTip.String() + `"}`
}

// A cancel that wins, judged by the chain's blocks: the task's transaction
// is pending (its tip is below what the node mines); the cancel's no-op,
// whose fees the lane raises as a gas bump's, replaces it in the node's pool
// and is mined: the wallet's one transaction on the chain is the no-op at
// the task's nonce, to the wallet itself with no value, the task's own never
// runs, and the task ends in error, cancelled.
func TestWalletCancel_ACancelThatWinsPutsTheNoopInTheBlockAndEndsTheTaskCancelled(t *testing.T) {
	t.Parallel()
	for name, start := range stallingChains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startCancelEnv(t, start)
			task, orig := e.stalled(stalledBody("0x"))
			code, out := e.do(http.MethodPost, "/v1/wallets/w/tasks/"+task.ID+"/cancel", "")
			require.Equal(t, http.StatusAccepted, code, out)

			sent := e.until(task.ID, "with its no-op", func(t sentTask) bool { return attemptOf(t, "cancel") != "" })
			noop := e.pending(attemptOf(sent, "cancel"))
			e.chain.mineReplacement(t)
			got := e.until(task.ID, "ended", func(t sentTask) bool { return t.Status == "done" || t.Status == "error" })
			require.Equal(t, "error", got.Status, got.Error)
			require.True(t, got.Cancelled)

			onChain := e.walletTxsOnChain()
			require.Len(t, onChain, 1, "one transaction of the wallet on the chain")
			mined := onChain[0]
			require.Equal(t, noop.Hash(), mined.Hash(), "the block holds the no-op")
			require.Equal(t, orig.Nonce(), mined.Nonce(), "at the task's nonce")
			require.Equal(t, e.addr, *mined.To(), "to the wallet itself")
			require.Zero(t, mined.Value().Sign(), "with no value")
			require.Empty(t, mined.Data())
			require.GreaterOrEqual(t, mined.GasTipCap().Cmp(testgeth.StallingMinerGasPrice), 0, "the bump rule raised the no-op's tip to what the miner takes")
			e.requireNotMined(orig.Hash().Hex())
			bal, err := e.chain.client.BalanceAt(t.Context(), common.HexToAddress(cancelTo), nil)
			require.NoError(t, err)
			require.Zero(t, bal.Sign(), "the recipient was never paid")
		})
	}
}

// A cancel that loses the race, judged by the chain's blocks: the cancel is
// recorded while the wallet's shard is held, so no worker can send the
// no-op; the chain then mines the task's own transaction; once the shard is
// free the worker finds the nonce taken. The wallet's one transaction on
// the chain is the task's own, no block ever holds a no-op, and the task
// ends done.
func TestWalletCancel_ACancelThatLosesTheRaceLeavesTheTasksTransactionInTheBlockAndTheTaskDone(t *testing.T) {
	t.Parallel()
	for name, start := range stallingChains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startCancelEnv(t, start)
			task, orig := e.stalled(stalledBody("0x"))
			release := e.holdShard()
			code, out := e.do(http.MethodPost, "/v1/wallets/w/tasks/"+task.ID+"/cancel", "")
			require.Equal(t, http.StatusAccepted, code, out)
			e.chain.mineStalled(t)
			rc := e.chain.waitMined(t, orig.Hash())
			require.Equal(t, types.ReceiptStatusSuccessful, rc.Status)
			release()

			got := e.until(task.ID, "ended", func(t sentTask) bool { return t.Status == "done" || t.Status == "error" })
			require.Equal(t, "done", got.Status, got.Error)
			require.False(t, got.Cancelled)
			require.Equal(t, orig.Hash().Hex(), common.HexToHash(got.TxHash).Hex())
			e.chain.moreBlocks(t)

			onChain := e.walletTxsOnChain()
			require.Len(t, onChain, 1, "one transaction of the wallet on the chain")
			require.Equal(t, orig.Hash(), onChain[0].Hash(), "the block holds the task's own transaction")
			for _, tx := range onChain {
				require.NotEqual(t, e.addr, *tx.To(), "no block holds a no-op")
			}
			if noop := attemptOf(e.get(task.ID), "cancel"); noop != "" {
				e.requireNotMined(noop)
			}
			bal, err := e.chain.client.BalanceAt(t.Context(), common.HexToAddress(cancelTo), nil)
			require.NoError(t, err)
			require.Equal(t, int64(1000), bal.Int64(), "the recipient was paid")
		})
	}
}

// A speed-up, judged by the chain's blocks: the pending transaction is
// replaced at its nonce by one with the same recipient, value, data and gas
// and the fee cap and tip asked for, which is what the chain mines; the
// task ends done with its hash.
func TestWalletCancel_ASpeedUpIsMinedAtTheSameNonceWithTheSameContentAndTheFeesAskedFor(t *testing.T) {
	t.Parallel()
	for name, start := range stallingChains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startCancelEnv(t, start)
			task, orig := e.stalled(stalledBody("0xc0ffee"))
			code, out := e.do(http.MethodPost, "/v1/wallets/w/tasks/"+task.ID+"/speed-up",
				`{"max_fee_per_gas":"`+speedCap.String()+`","max_priority_fee_per_gas":"`+speedTip.String()+`"}`)
			require.Equal(t, http.StatusAccepted, code, out)

			sent := e.until(task.ID, "sped up", func(t sentTask) bool { return attemptOf(t, "speed_up") != "" })
			sped := e.pending(attemptOf(sent, "speed_up"))
			e.chain.mineReplacement(t)
			got := e.until(task.ID, "ended", func(t sentTask) bool { return t.Status == "done" || t.Status == "error" })
			require.Equal(t, "done", got.Status, got.Error)
			require.Equal(t, sped.Hash(), common.HexToHash(got.TxHash))

			onChain := e.walletTxsOnChain()
			require.Len(t, onChain, 1, "one transaction of the wallet on the chain")
			mined := onChain[0]
			require.Equal(t, sped.Hash(), mined.Hash(), "the block holds the speed-up")
			require.Equal(t, orig.Nonce(), mined.Nonce())
			require.Equal(t, *orig.To(), *mined.To())
			require.Equal(t, 0, orig.Value().Cmp(mined.Value()))
			require.True(t, bytes.Equal(orig.Data(), mined.Data()), "data %x, want %x", mined.Data(), orig.Data())
			require.Equal(t, orig.Gas(), mined.Gas())
			require.Equal(t, 0, mined.GasFeeCap().Cmp(speedCap), "fee cap %s", mined.GasFeeCap())
			require.Equal(t, 0, mined.GasTipCap().Cmp(speedTip), "tip %s", mined.GasTipCap())
			e.requireNotMined(orig.Hash().Hex())
		})
	}
}
