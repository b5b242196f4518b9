package monitor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// outcome is a task a confirm ends done, with its transaction's receipt.
type outcome struct {
	attempt store.Attempt
	receipt ledger.Receipt
}

// outcomes are the tasks this cycle's commit ends done, each with the
// receipt it is recorded by (a cancel's no-op ends its task cancelled,
// not done, and has none).
func (c *confirmCycle) outcomes() []outcome {
	var out []outcome
	for _, r := range c.confirmed {
		rc, ok := c.mined[r.Hash]
		if !ok || !r.Final || r.Attempt.Noop() || r.Attempt.Kind == store.AttemptCancel {
			continue
		}
		out = append(out, outcome{attempt: r.Attempt, receipt: rc})
	}
	return out
}

// replayReverts is Execute's last read: each task about to end done with
// a reverted receipt (rare) has its transaction replayed with eth_call at
// its receipt's block and the revert decoded by the task's ABI, as a
// preflight's is, for Commit to record with the task done. It never fails
// the cycle: a replay that fails, does not revert, or is past the cycle's
// budget is recorded as unavailable, with why.
func (c *confirmCycle) replayReverts(ctx context.Context, b wallet.Budget) {
	calls := 0
	for _, o := range c.outcomes() {
		if o.receipt.Status != ledger.ReceiptReverted {
			continue
		}
		var rev calldata.Revert
		if b.Spent(calls) {
			rev = calldata.Unavailable("not replayed: the confirm's time for the ledger was spent")
		} else {
			calls++
			rev = c.replay(ctx, o)
		}
		raw, err := json.Marshal(rev)
		if err != nil {
			continue // a calldata.Revert always marshals
		}
		if c.reverts == nil {
			c.reverts = map[string]json.RawMessage{}
		}
		c.reverts[o.attempt.TaskID] = raw
	}
}

// replay runs o's reverted transaction again as a call at its receipt's
// block (the state after it, which holds what changed before it) with its
// own gas limit, and decodes what it reverts with.
func (c *confirmCycle) replay(ctx context.Context, o outcome) calldata.Revert {
	task, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) (store.Task, error) {
		return c.m.store.TaskGet(ctx, c.Wallet.ID, o.attempt.TaskID)
	})
	if err != nil {
		return calldata.Unavailable(fmt.Sprintf("its request could not be read to replay it: %v", err))
	}
	var abiJSON json.RawMessage
	if task.Request.Call != nil {
		abiJSON = task.Request.Call.ABI
	}
	to := ledger.Address(common.HexToAddress(task.Request.To))
	msg := ledger.CallMsg{From: c.Wallet.Address(), To: &to, Value: task.Request.Value, Data: task.Request.Data, Gas: o.attempt.GasLimit}
	block := o.receipt.BlockNumber
	_, err = wallet.Within(ctx, c.m.cfg.LedgerTimeout, func(ctx context.Context) ([]byte, error) { return c.m.ledger.Call(ctx, msg, &block) })
	switch {
	case err == nil:
		return calldata.Unavailable(fmt.Sprintf("its replay at block %d did not revert (the state it ran on is not what a call there sees)", block))
	case ledger.Reverted(err):
		if re, ok := ledger.RevertDataOf(err); ok {
			return calldata.DecodeRevert(re.Data, re.Truncated, abiJSON)
		}
		return calldata.DecodeRevert(nil, false, nil)
	}
	return calldata.Unavailable(fmt.Sprintf("its replay at block %d failed: %s", block, ledger.ReasonOf(err)))
}

// taskOutcomes are what Commit records beside the tasks it ends done: the
// logs of each transaction that emitted some, kept as the ledger read them
// (the task's ABI decodes their events when the task is read, so the
// confirm reads no task for them), and the reverts replayReverts decoded.
// A task whose transaction left neither (a plain transfer) is not named.
func (c *confirmCycle) taskOutcomes() []store.TaskOutcome {
	var out []store.TaskOutcome
	for _, o := range c.outcomes() {
		t := store.TaskOutcome{ID: o.attempt.TaskID, Revert: c.reverts[o.attempt.TaskID]}
		if len(o.receipt.Logs) > 0 {
			raw := make([]calldata.RawLog, len(o.receipt.Logs))
			for i, lg := range o.receipt.Logs {
				topics := make([]common.Hash, len(lg.Topics))
				for j, tp := range lg.Topics {
					topics[j] = common.Hash(tp)
				}
				raw[i] = calldata.RawLog{Index: lg.Index, Address: common.Address(lg.Address), Topics: topics, Data: lg.Data}
			}
			logs, err := json.Marshal(calldata.DecodeLogs(raw, common.Address{}, nil))
			if err == nil { // calldata.Logs always marshals
				t.Logs = logs
			}
		}
		if t.Logs != nil || t.Revert != nil {
			out = append(out, t)
		}
	}
	return out
}
