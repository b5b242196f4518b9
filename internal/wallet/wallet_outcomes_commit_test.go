package wallet_test

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/params"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// loggingLedger gives each successful transaction that carried data (its
// receipt used more gas than a plain transfer) one log, as a contract call
// emits: evmsim's receipts have none.
type loggingLedger struct{ ledger.WalletLedger }

// emitted is the log loggingLedger adds.
var emitted = ledger.Log{Address: ledger.Address{0xaa}, Topics: []ledger.Hash{{0x01}}, Data: []byte{0xbe, 0xef}, Index: 3}

func (l loggingLedger) TransactionReceipt(ctx context.Context, h ledger.TxHash) (ledger.Receipt, error) {
	r, err := l.WalletLedger.TransactionReceipt(ctx, h)
	if err == nil && r.Found && r.Status == ledger.ReceiptSuccess && r.GasUsed > params.TxGas {
		r.Logs = []ledger.Log{emitted}
	}
	return r, err
}

// wantLogs is how a task stores emitted.
const wantLogs = `{"logs":[{"index":3,"address":"0xaa00000000000000000000000000000000000000","topics":["0x0100000000000000000000000000000000000000000000000000000000000000"],"data":"0xbeef"}],"count":1}`

// A crash right after the confirm's commit that ends the tasks done: the
// logs of the one that emitted some and the decoded revert of the one
// that reverted were recorded in that commit, so nothing is left for a
// process that stopped there; the next process changes neither.
func TestWallet_ACrashAfterTheConfirmsCommitLeavesTheLogsAndTheRevertRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	led := loggingLedger{e.led}
	called := e.post(t, 0, 0, 1000, []byte{0x01})
	rev := e.postRequest(t, 0, store.TaskRequest{Value: big.NewInt(1000), Data: append(append([]byte(nil), evmsim.RevertMarker...), 1, 2), SkipPreflight: true})
	crashed, _ := e.newProcess(t, led)
	runPool(t, e.pool)
	e.chain.Mine()
	_, err := e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
		if isCycle(cyc, "*monitor.confirmCycle") && step == "commit" {
			// The process dies as soon as this commit returns.
			require.NoError(t, cyc.Commit(t.Context()))
			return true
		}
		return false
	})
	for _, task := range []store.Task{called, rev} {
		require.Equal(t, store.TaskDone, e.task(t, task).Status, "the confirm that ended it done committed")
	}
	require.JSONEq(t, wantLogs, string(e.task(t, called).Logs))
	require.Empty(t, e.task(t, called).Revert)
	require.JSONEq(t, `{"kind":"raw","data":"0x0102","problem":"shorter than a selector"}`, string(e.task(t, rev).Revert))
	require.JSONEq(t, `{"logs":[],"count":0}`, string(e.task(t, rev).Logs), "a reverted transaction emits none")

	e.expireLeases(t)
	_, pool := e.newProcess(t, led)
	e.chain.Mine()
	_, err = e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	runPool(t, pool)
	require.JSONEq(t, wantLogs, string(e.task(t, called).Logs))
	require.JSONEq(t, `{"kind":"raw","data":"0x0102","problem":"shorter than a selector"}`, string(e.task(t, rev).Revert))
}

// statementCounter counts the statements a pool runs whose SQL is the
// named query's.
type statementCounter struct {
	name string
	n    atomic.Int32
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "-- name: "+c.name+" ") {
		c.n.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The confirm records what its done tasks' transactions left in one
// statement, whatever their number, and a confirm whose done tasks left
// nothing (plain transfers: no logs, no revert) makes none. Their logs are
// in the first answer that reports them done.
func TestWallet_AConfirmRecordsItsTasksLogsInOneStatementAndNoneForPlainTransfers(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	count := &statementCounter{name: "TaskRecordOutcomes"}
	cfg, err := pgxpool.ParseConfig(e.db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)
	led := loggingLedger{e.led}
	job, err := wallet.NewJob(st, led, e.reg, e.cfg, walletSteps(t, st, led, e.cfg))
	require.NoError(t, err)
	traced, err := workers.NewScheduler(st, loop.Deps{Clock: e.clk, Logger: testLogger()}, e.wcfg, map[string]workers.Job{wallet.Kind: job})
	require.NoError(t, err)

	plain := e.postN(t, 3)
	e.drive(t, traced, 10, plain...)
	e.requireDoneOnce(t, plain...)
	require.Zero(t, count.n.Load(), "plain transfers: no statement for their logs")
	for _, task := range plain {
		require.JSONEq(t, `{"logs":[],"count":0}`, string(e.task(t, task).Logs), "done, with no logs")
	}

	calls := []store.Task{e.post(t, 0, 0, 1000, []byte{0x01}), e.post(t, 0, 0, 1001, []byte{0x02})}
	e.drive(t, traced, 10, calls...)
	e.requireDoneOnce(t, calls...)
	require.Equal(t, int32(1), count.n.Load(), "one statement for the confirm's two tasks with logs")
	for _, task := range calls {
		got := e.task(t, task)
		require.JSONEq(t, wantLogs, string(got.Logs))
		var logs calldata.Logs
		require.NoError(t, json.Unmarshal(got.Logs, &logs))
		require.Nil(t, logs.Logs[0].Event, "no ABI: not decoded")
	}
}
