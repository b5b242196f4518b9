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

// outcome is a task a confirm ended done, with its transaction's receipt.
type outcome struct {
	attempt store.Attempt
	receipt ledger.Receipt
}

// outcomes are the tasks this cycle's commit ended done, each with the
// receipt it was recorded by (a cancel's no-op ends its task cancelled,
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

// recordOutcomes records, after a confirm's commit and beside it, what the
// transactions of the tasks it ended done left: their logs (decoded by the
// task's ABI) and, for one that reverted, its revert, replayed with eth_call
// at its receipt's block and decoded the same way as a preflight's. It is
// best effort and holds up nothing: it runs on its own, each call within
// its own deadline, and a replay that fails or does not revert records the
// revert as unavailable, with why. A process that stops first leaves the
// task without them.
func (m *WalletConfirmer) recordOutcomes(walletID string, from ledger.Address, outs []outcome) {
	if len(outs) == 0 {
		return
	}
	m.outcomes.Go(func() {
		ctx := context.Background()
		for _, o := range outs {
			if err := m.recordOutcome(ctx, walletID, from, o); err != nil {
				m.cfg.Logger.Warn("wallet: the logs or revert of a done task were not recorded", "task", o.attempt.TaskID, "error", err)
			}
		}
	})
}

func (m *WalletConfirmer) recordOutcome(ctx context.Context, walletID string, from ledger.Address, o outcome) error {
	task, err := wallet.Within(ctx, m.cfg.DBTimeout, func(ctx context.Context) (store.Task, error) {
		return m.store.TaskGet(ctx, walletID, o.attempt.TaskID)
	})
	if err != nil {
		return err
	}
	var abiJSON json.RawMessage
	if task.Request.Call != nil {
		abiJSON = task.Request.Call.ABI
	}
	to := common.HexToAddress(task.Request.To)
	raw := make([]calldata.RawLog, len(o.receipt.Logs))
	for i, lg := range o.receipt.Logs {
		topics := make([]common.Hash, len(lg.Topics))
		for j, t := range lg.Topics {
			topics[j] = common.Hash(t)
		}
		raw[i] = calldata.RawLog{Index: lg.Index, Address: common.Address(lg.Address), Topics: topics, Data: lg.Data}
	}
	logs, err := json.Marshal(calldata.DecodeLogs(raw, to, abiJSON))
	if err != nil {
		return fmt.Errorf("writing the logs: %w", err)
	}
	p := store.TaskSetOutcomeParams{ID: task.ID, Logs: logs}
	if o.receipt.Status == ledger.ReceiptReverted {
		rev, err := json.Marshal(m.replay(ctx, from, task, o, abiJSON))
		if err != nil {
			return fmt.Errorf("writing the revert: %w", err)
		}
		p.Revert = rev
	}
	_, err = wallet.Within(ctx, m.cfg.DBTimeout, func(ctx context.Context) (bool, error) { return m.store.TaskSetOutcome(ctx, p) })
	return err
}

// replay runs a reverted transaction again as a call at its receipt's
// block (the state after it, which holds what changed before it) with its
// own gas limit, and decodes what it reverts with.
func (m *WalletConfirmer) replay(ctx context.Context, from ledger.Address, task store.Task, o outcome, abiJSON json.RawMessage) calldata.Revert {
	to := ledger.Address(common.HexToAddress(task.Request.To))
	msg := ledger.CallMsg{From: from, To: &to, Value: task.Request.Value, Data: task.Request.Data, Gas: o.attempt.GasLimit}
	block := o.receipt.BlockNumber
	_, err := wallet.Within(ctx, m.cfg.LedgerTimeout, func(ctx context.Context) ([]byte, error) { return m.ledger.Call(ctx, msg, &block) })
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
