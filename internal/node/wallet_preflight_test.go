package node_test

import (
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// outcomeTask is a task's answer with what its call left: its revert and
// its logs.
type outcomeTask struct {
	Status   string           `json:"status"`
	Error    string           `json:"error"`
	TxHash   string           `json:"tx_hash"`
	Reverted bool             `json:"reverted"`
	Revert   *calldata.Revert `json:"revert"`
	Logs     *calldata.Logs   `json:"logs"`
}

func (w *walletAPI) outcome(id string) outcomeTask {
	w.t.Helper()
	code, out := w.do(http.MethodGet, "/v1/wallets/w/tasks/"+id, "")
	require.Equal(w.t, http.StatusOK, code, out)
	var r struct {
		Task outcomeTask `json:"task"`
	}
	require.NoError(w.t, json.Unmarshal([]byte(out), &r))
	return r.Task
}

// outcomeWhen waits until the task's answer satisfies cond.
func (w *walletAPI) outcomeWhen(id, what string, cond func(outcomeTask) bool) outcomeTask {
	w.t.Helper()
	var got outcomeTask
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		got = w.outcome(id)
		assert.True(c, cond(got), "task %s: %+v", id, got)
	}, 30*time.Second, 50*time.Millisecond, "task %s: %s", id, what)
	return got
}

// outcomeEnded: the task is done or in error.
func outcomeEnded(o outcomeTask) bool { return o.Status == "done" || o.Status == "error" }

// walletTxs returns every transaction of addr in the chain's blocks.
func walletTxs(t *testing.T, client *ethclient.Client, chainID *big.Int, addr common.Address) []*types.Transaction {
	t.Helper()
	signer := types.LatestSignerForChainID(chainID)
	var out []*types.Transaction
	for n := range head(t, client) + 1 {
		b, err := client.BlockByNumber(t.Context(), new(big.Int).SetUint64(n))
		require.NoError(t, err)
		for _, tx := range b.Transactions() {
			if from, err := types.Sender(signer, tx); err == nil && from == addr {
				out = append(out, tx)
			}
		}
	}
	return out
}

// On a real geth --dev and a real anvil, with Reverter deployed from the
// committed artefacts: the preflight refuses each call that would revert —
// Error(string), a custom error by the task's ABI and, called by signature,
// raw with its selector, Panic(0x12) — with the decoded reason, and spends
// no nonce (the wallet's chain nonce stays 0, no transaction of the wallet
// in the blocks); a pair whose second call depends on the first (the
// contract armed by the test, then arm(false) and failIfArmed() posted
// together) both end done (the wait rule); a reverting call sent without
// its preflight, with a gas limit, is mined reverted and its task gets the
// decoded reason by the replay; a call that succeeds gets its event decoded
// in the task's logs.
func TestWalletPreflight_ARevertingCallIsRefusedWithItsReasonAndNoNonceOnARealNode(t *testing.T) {
	t.Parallel()
	for name, start := range contractNodes() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			signer := testfactory.NewSigner(t)
			holder := common.Address(signer.Address())
			url, client, deployer := start(t, holder)
			reverter := testcontracts.Deploy(t, client, deployer, testcontracts.Reverter)
			testcontracts.Transact(t, client, deployer, testcontracts.Reverter, reverter, "arm", true)
			abiJSON := string(testcontracts.ABIJSON(testcontracts.Reverter))
			to := `"to":"` + reverter.Hex() + `"`
			w := startChainWalletAPI(t, signer, url)

			// Refused: each ends in error, and the wallet sends nothing.
			nope := w.send(`{` + to + `,"function":"requireOk(bool,string)","args":[false,"nope"]}`)
			quotaByABI := w.send(`{` + to + `,"abi":` + abiJSON + `,"method":"quota","args":[5,3]}`)
			quotaBySig := w.send(`{` + to + `,"function":"quota(uint256,uint256)","args":[5,3]}`)
			divide := w.send(`{` + to + `,"function":"divide(uint256,uint256)","args":[1,0]}`)
			for _, id := range []string{nope.ID, quotaByABI.ID, quotaBySig.ID, divide.ID} {
				require.Equal(t, "error", w.ended(id).Status)
			}
			got := w.outcome(nope.ID)
			require.Equal(t, "preflight: execution reverted: nope", got.Error)
			require.Equal(t, calldata.RevertError, got.Revert.Kind)
			require.Equal(t, "nope", got.Revert.Message)

			got = w.outcome(quotaByABI.ID)
			require.Equal(t, calldata.RevertCustom, got.Revert.Kind, "%+v", got.Revert)
			require.Equal(t, "QuotaExceeded", got.Revert.Name)
			require.Equal(t, `{"who":"`+holder.Hex()+`","need":"5","have":"3"}`, string(got.Revert.Args), "in the declaration's order")

			quotaID := testcontracts.ABI(testcontracts.Reverter).Errors["QuotaExceeded"].ID
			quotaSelector := "0x" + common.Bytes2Hex(quotaID[:4])
			got = w.outcome(quotaBySig.ID)
			require.Equal(t, calldata.RevertRaw, got.Revert.Kind, "%+v", got.Revert)
			require.Equal(t, quotaSelector, got.Revert.Selector)
			require.Contains(t, got.Error, quotaSelector[2:])

			got = w.outcome(divide.ID)
			require.Equal(t, calldata.RevertPanic, got.Revert.Kind, "%+v", got.Revert)
			require.Equal(t, "0x12", got.Revert.Code)
			require.Equal(t, "division or modulo by zero", got.Revert.Meaning)

			nonce, err := client.NonceAt(t.Context(), holder, nil)
			require.NoError(t, err)
			require.Zero(t, nonce, "no refused call spent a nonce")
			require.Empty(t, walletTxs(t, client, big.NewInt(testgeth.DevChainID), holder), "no transaction of the wallet is in the blocks")

			// The wait rule: failIfArmed reverts until arm(false), ahead of
			// it, is mined.
			disarm := w.send(`{` + to + `,"function":"arm(bool)","args":[false]}`)
			dependent := w.send(`{` + to + `,"function":"failIfArmed()","args":[]}`)
			for _, id := range []string{disarm.ID, dependent.ID} {
				got := w.ended(id)
				require.Equal(t, "done", got.Status, got.Error)
			}
			require.Equal(t, false, testcontracts.Call(t, client, testcontracts.Reverter, reverter, "armed")[0])
			require.Equal(t, big.NewInt(1), testcontracts.Call(t, client, testcontracts.Reverter, reverter, "counter")[0])

			// Without its preflight, with a gas limit: mined, reverted, and
			// its reason replayed onto the task.
			late := w.send(`{` + to + `,"function":"requireOk(bool,string)","args":[false,"late"],"preflight":false,"gas_limit":200000}`)
			// The answer that first reports it done has its revert: it is
			// recorded by the confirm that ends it done.
			got = w.outcomeWhen(late.ID, "ended", outcomeEnded)
			require.Equal(t, "done", got.Status, got.Error)
			require.NotNil(t, got.Revert, "recorded with the task done")
			require.True(t, got.Reverted)
			require.Equal(t, calldata.RevertError, got.Revert.Kind, "%+v", got.Revert)
			require.Equal(t, "late", got.Revert.Message)
			receipt, err := client.TransactionReceipt(t.Context(), common.HexToHash(got.TxHash))
			require.NoError(t, err)
			require.Equal(t, types.ReceiptStatusFailed, receipt.Status, "the chain reverted it")

			// A call that succeeds: its event, decoded by the ABI.
			ok := w.send(`{` + to + `,"abi":` + abiJSON + `,"method":"succeed","args":["x"]}`)
			got = w.outcomeWhen(ok.ID, "ended", outcomeEnded)
			require.Equal(t, "done", got.Status, got.Error)
			require.NotNil(t, got.Logs, "recorded with the task done")
			require.False(t, got.Reverted)
			require.Nil(t, got.Revert)
			require.Len(t, got.Logs.Logs, 1)
			ev := got.Logs.Logs[0].Event
			require.NotNil(t, ev, "%+v", got.Logs.Logs[0])
			require.Equal(t, "Done", ev.Name)
			require.JSONEq(t, `{"caller":"`+holder.Hex()+`","counter":"2","note":"x"}`, string(ev.Args))
		})
	}
}
