package wallet_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// Nothing a client sends and nothing a chain does may stop a wallet: a
// refused transaction never blocks its identical successor, one task's
// fees never pause the others, a task whose send keeps failing ends in
// error alone, and transactions that leave the chain are sent again with
// the same bytes until they are final.

var deadAddr = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// insertReq stores a task of wallet w with the request req.
func (e *env) insertReq(t *testing.T, w int, req store.TaskRequest) store.Task {
	t.Helper()
	e.clk.Advance(time.Microsecond)
	return e.rows.PostTask(testfactory.Task{Wallet: e.wallets[w].ID, ChainID: chainID, Sender: e.wallets[w].Address().Hex(), Request: req})
}

// requireNoFailedRun checks that no run of wallet w's shard has failed:
// nothing stopped it.
func (e *env) requireNoFailedRun(t *testing.T, w int) {
	t.Helper()
	sh, err := e.st.ShardGet(t.Context(), e.key(w))
	require.NoError(t, err)
	require.Zero(t, sh.Failures, "the wallet's runs failed: %s", sh.LastError)
	require.Empty(t, sh.LastError)
}

// A request the node refuses (more value than the wallet holds) ends in
// error and frees its nonce; the identical request sent again signs the same
// bytes at the same nonce, so the same hash is stored a second time. It is
// tried, refused and ends in error on its own, and the wallet goes on.
func TestWallet_AnIdenticalRetryOfARefusedTaskIsTriedAgainAndTheWalletGoesOn(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	gwei := big.NewInt(params.GWei)
	req := store.TaskRequest{To: deadAddr.Hex(), Value: new(big.Int).Mul(big.NewInt(2000), ether), TipCap: gwei, FeeCap: new(big.Int).Mul(big.NewInt(3), gwei)}
	first := e.insertReq(t, 0, req)
	e.drive(t, e.pool, 5, first)
	second := e.insertReq(t, 0, req)
	e.drive(t, e.pool, 5, second)
	for _, task := range []store.Task{first, second} {
		got := e.task(t, task)
		require.Equal(t, store.TaskError, got.Status)
		require.True(t, strings.HasPrefix(got.Error, "insufficient funds"), got.Error)
	}
	a1, a2 := e.attempts(t, first), e.attempts(t, second)
	require.Len(t, a1, 1)
	require.Len(t, a2, 1)
	require.Equal(t, a1[0].TxHash, a2[0].TxHash, "the same request signs the same bytes at the freed nonce")
	require.NotEqual(t, a1[0].ID, a2[0].ID)

	ok := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 5, ok)
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, ok))
	e.requireNoFailedRun(t, 0)
	require.False(t, e.health(t).Paused)
}

// A task whose own fee cap the wallet cannot pay ends in error alone: the
// balance threshold stays what a plain transfer costs, the wallet does not
// pause, and the tasks after it are sent. A fee cap at the top of the
// uint256 range (as an operator could write it) does too.
func TestWallet_ATaskTheWalletCannotAffordEndsInErrorAloneAndPausesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	gwei := big.NewInt(params.GWei)
	huge, _ := new(big.Int).SetString("1000000000000000000000000000000", 10)
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	var pricey []store.Task
	for _, feeCap := range []*big.Int{huge, maxUint256} {
		pricey = append(pricey, e.insertReq(t, 0, store.TaskRequest{To: deadAddr.Hex(), Value: big.NewInt(1), TipCap: gwei, FeeCap: feeCap}))
	}
	after := e.postN(t, 3)
	e.drive(t, e.pool, 10, append(append([]store.Task(nil), pricey...), after...)...)
	for _, task := range pricey {
		got := e.task(t, task)
		require.Equal(t, store.TaskError, got.Status)
		require.True(t, strings.HasPrefix(got.Error, "insufficient funds"), got.Error)
	}
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, after...))
	h := e.health(t)
	require.False(t, h.Paused)
	require.Negative(t, h.Threshold.Cmp(new(big.Int).Mul(big.NewInt(21_000), big.NewInt(100*params.GWei))),
		"the threshold is an ordinary transfer's cost, not the refused task's: %s", h.Threshold)
	e.requireNoFailedRun(t, 0)
}

// A task whose send keeps failing on a value the database refuses (here a
// trigger stands for any stored value a statement cannot take) ends in
// error after MaxFailures runs, and the tasks queued after it are sent: the
// runs after the first failure send it alone, so no other task is blamed.
func TestWallet_ATaskWhoseSendKeepsFailingOnItsOwnValueEndsInErrorAndTheWalletMovesOn(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.MaxFailures = 3 }})
	ok1 := e.post(t, 0, 0, 1, nil)
	poison := e.post(t, 0, 0, 2, nil)
	rest := e.postN(t, 2)
	_, err := e.st.DB().Exec(t.Context(), `
		CREATE FUNCTION ledgerq.test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.task_id = '`+poison.ID+`' THEN
				RAISE EXCEPTION 'numeric field overflow' USING ERRCODE = '22003';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_refuse BEFORE INSERT ON ledgerq.tx_attempts FOR EACH ROW EXECUTE FUNCTION ledgerq.test_refuse();`)
	require.NoError(t, err)
	all := append([]store.Task{ok1, poison}, rest...)
	for range 30 {
		if e.allEnded(t, all) {
			break
		}
		_, err := e.follower.RunOnce(t.Context())
		require.NoError(t, err)
		runPool(t, e.pool)
		// The shard's backoff after a failed run.
		e.clk.Advance(2 * time.Minute)
	}
	got := e.task(t, poison)
	require.Equal(t, store.TaskError, got.Status)
	require.Contains(t, got.Error, "numeric field overflow")
	require.Contains(t, got.Error, "3 consecutive runs")
	require.Empty(t, e.attempts(t, poison), "nothing was stored for it")
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, append([]store.Task{ok1}, rest...)...))
}

// finalEnv is a wallet on a simulated chain whose blocks come on demand.
func finalEnv(t *testing.T, confirmations int) *env {
	t.Helper()
	return setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) {
		c.Confirmations = confirmations
	}})
}

// sendAndMine posts n tasks, runs the wallet once (which sends them) and
// mines them in one block, which the wallet's next run follows.
func (e *env) sendAndMine(t *testing.T, n int) []store.Task {
	t.Helper()
	tasks := e.postN(t, n)
	e.drive1(t)
	e.mineAndFollow(t)
	return tasks
}

// mineAndFollow mines one block and runs the wallet once.
func (e *env) mineAndFollow(t *testing.T) {
	t.Helper()
	e.chain.Mine()
	e.clk.Advance(time.Second)
	e.drive1(t)
}

// A transaction is final only when it is wallet.Config.Confirmations blocks deep:
// until then its task is executing and its attempt mined in the block the
// receipt names.
func TestWallet_ATaskIsDoneOnlyWhenItsTransactionIsConfirmationsDeep(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 3)
	e.subscribeAll(t, 0)
	task := e.post(t, 0, 0, 1, nil)
	e.drive1(t)
	e.mineAndFollow(t) // in block 1: one confirmation
	require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	att := e.attempts(t, task)[0]
	require.Equal(t, store.AttemptMined, att.State)
	require.NotNil(t, att.MinedBlock)
	require.EqualValues(t, 1, *att.MinedBlock)
	head := e.chain.Head()
	require.Equal(t, head.Hash.Hex(), att.MinedBlockHash)
	e.mineAndFollow(t) // two
	require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	e.mineAndFollow(t) // three
	require.Equal(t, store.TaskDone, e.task(t, task).Status)
	e.requireDoneOnce(t, task)
	events := e.outboxOf(t, task)
	require.Equal(t, []store.WebhookEventType{store.WebhookSubmitted, store.WebhookConfirmed}, []store.WebhookEventType{events[0].Type, events[len(events)-1].Type})
	require.Len(t, events, 2, "confirmed once, when final")
}

// A mined transaction not yet final whose block the chain replaces (a reorg
// that drops it from the pool) goes back to sent and its same bytes are
// broadcast again: it is mined again, with the same hash, and the task is
// done once. No nonce is signed twice.
func TestWallet_AMinedTransactionWhoseBlockIsReorganizedIsSentAgainWithTheSameBytes(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 3)
	tasks := e.sendAndMine(t, 3)
	for _, task := range tasks {
		require.Equal(t, store.AttemptMined, e.attempts(t, task)[0].State)
	}
	e.chain.SetReorgDropRate(1)
	n, err := e.chain.Reorg(1)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	e.waitOutRewind(t, tasks...)
	for _, task := range tasks {
		a := e.attempts(t, task)[0]
		require.Equal(t, store.AttemptSent, a.State, "back to sent")
		require.Equal(t, 1, a.Reorgs)
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	}
	for range 4 {
		e.mineAndFollow(t)
	}
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	e.requireOneTxPerNonce(t, 0)
	for _, task := range tasks {
		require.Equal(t, 1, e.task(t, task).Reorgs)
	}
}

// The chain's nonce falls below what ledgerq thought final (a node that lost
// its last blocks and its pool, or was restored from an older state): the
// done tasks whose transactions the chain no longer has are executing
// again, their same bytes broadcast again, and they are done again with the
// same hashes; the wallet's next nonce is not moved down, and the tasks
// after them are sent as usual.
func TestWallet_WhenTheChainLosesFinalTransactionsTheirTasksAreSentAgainWithTheSameBytes(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 1)
	e.subscribeAll(t, 0)
	first := e.sendAndMine(t, 3)
	lost := e.sendAndMine(t, 3)
	e.requireDoneOnce(t, append(append([]store.Task(nil), first...), lost...)...)
	hashes := map[string]string{}
	for _, task := range lost {
		hashes[task.ID] = e.task(t, task).TxHash
	}

	e.chain.SetReorgDropRate(1)
	_, err := e.chain.Reorg(1) // nonces 3, 4 and 5 leave the chain and the pool
	require.NoError(t, err)
	chainNonce, err := e.chain.NonceAt(t.Context(), e.wallets[0].Address())
	require.NoError(t, err)
	require.EqualValues(t, 3, chainNonce)
	next := e.postN(t, 2)
	e.waitOutRewind(t, lost...)
	for _, task := range lost {
		got := e.task(t, task)
		require.Equal(t, store.TaskExecuting, got.Status, "no longer done: the chain lost it")
		require.Equal(t, 1, got.Reorgs)
	}
	require.EqualValues(t, 8, e.nextNonce(t), "the next nonce is not moved down")
	for range 3 {
		e.mineAndFollow(t)
	}
	all := append(append(append([]store.Task(nil), first...), lost...), next...)
	nonces := e.requireDoneOnce(t, all...)
	e.requireContiguous(t, 0, 0, nonces)
	e.requireOneTxPerNonce(t, 0)
	for _, task := range lost {
		require.Equal(t, hashes[task.ID], e.task(t, task).TxHash, "done again with the same transaction")
		types := []store.WebhookEventType{}
		for _, ev := range e.outboxOf(t, task) {
			types = append(types, ev.Type)
		}
		require.Equal(t, []store.WebhookEventType{store.WebhookSubmitted, store.WebhookConfirmed, store.WebhookReorged, store.WebhookConfirmed}, types)
	}
	e.requireNoFailedRun(t, 0)
}

// waitOutRewind follows a chain that went back to a shorter one: while
// wallet.Config.RewindAfter has not passed since a head as high as the old
// one was answered, the lower head may be a lagging node's and nothing
// changes (tasks keep their states); after it, the wallet runs once on the
// shorter chain.
func (e *env) waitOutRewind(t *testing.T, tasks ...store.Task) {
	t.Helper()
	before := make([]store.Task, len(tasks))
	for i, task := range tasks {
		before[i] = e.task(t, task)
	}
	e.drive1(t)
	for i, task := range tasks {
		got := e.task(t, task)
		require.Equal(t, before[i].Status, got.Status, "task %d: unchanged while the lower head may be a lagging node's", i)
		require.Equal(t, before[i].Reorgs, got.Reorgs, "task %d", i)
	}
	e.clk.Advance(e.cfg.RewindAfter)
	e.drive1(t)
}

// laggingNonce answers a lower chain nonce than the chain's (a node behind
// the others, behind a load balancer) while receipts come from the chain.
type laggingNonce struct {
	*ledgertest.WalletLedger
	lag uint64
}

func (l *laggingNonce) NonceAt(ctx context.Context, a ledger.Address) (uint64, error) {
	n, err := l.WalletLedger.NonceAt(ctx, a)
	return n - min(n, l.lag), err
}

// A node whose nonce lags but whose receipts still have the transactions
// changes nothing: the receipts decide.
func TestWallet_ANonceThatLagsItsReceiptsReopensNothing(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 1)
	tasks := e.sendAndMine(t, 3)
	e.requireDoneOnce(t, tasks...)
	_, e.pool = e.newProcess(t, &laggingNonce{WalletLedger: e.led, lag: 2})
	e.drive1(t)
	for _, task := range tasks {
		require.Equal(t, store.TaskDone, e.task(t, task).Status)
		require.Zero(t, e.task(t, task).Reorgs)
	}
}

// A node that restarted and forgot its pool (its blocks kept): the sent
// transactions past the chain's nonce are broadcast again with the same
// bytes once the nonce has not moved for RebroadcastAfter, long before the
// stall timeout would bump them.
func TestWallet_SentTransactionsANodeForgotAreBroadcastAgainAfterRebroadcastAfter(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 1)
	tasks := e.postN(t, 3)
	e.drive1(t)
	e.chain.ForgetPool()
	for range 3 {
		e.mineAndFollow(t)
	}
	for _, task := range tasks {
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status, "nothing mined: the node forgot them")
	}
	sends := e.led.Calls("SendRawTransaction")
	e.clk.Advance(e.cfg.RebroadcastAfter)
	e.drive1(t)
	require.Equal(t, sends+3, e.led.Calls("SendRawTransaction"), "the three broadcast again")
	e.mineAndFollow(t)
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, tasks...))
	e.requireOneTxPerNonce(t, 0)
	require.Zero(t, e.tasksBumped(t), "not bumped")
}

// tasksBumped is the number of bumps of wallet 0's tasks.
func (e *env) tasksBumped(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT coalesce(sum(bumps), 0) FROM ledgerq.wallet_tasks`).Scan(&n))
	return n
}

// A reorg that returns a mined, not yet final transaction to the pool (the
// usual kind): it is mined again in a block of the new chain, with the same
// hash, and its attempt follows it there; the task is done once it is deep
// enough in the new chain.
func TestWallet_AMinedTransactionMinedAgainInANewBlockFollowsItThere(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 3)
	task := e.post(t, 0, 0, 1, nil)
	e.drive1(t)
	e.mineAndFollow(t)
	before := e.attempts(t, task)[0]
	require.Equal(t, store.AttemptMined, before.State)
	_, err := e.chain.Reorg(1)
	require.NoError(t, err)
	e.mineAndFollow(t) // block 1 again, another hash, the same transaction
	after := e.attempts(t, task)[0]
	require.Equal(t, store.AttemptMined, after.State)
	require.EqualValues(t, 1, *after.MinedBlock)
	require.NotEqual(t, before.MinedBlockHash, after.MinedBlockHash, "it follows its transaction into the new block")
	require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	e.mineAndFollow(t)
	e.mineAndFollow(t)
	e.requireDoneOnce(t, task)
	e.requireOneTxPerNonce(t, 0)
}

// staleIndex answers for hashes it was told a receipt of the block they were
// in before the chain lost it, as a geth that crashed does (its index by
// hash keeps entries of the lost blocks, so the transactions it mines again
// in other blocks are answered from the lost ones).
type staleIndex struct {
	*ledgertest.WalletLedger
	stale map[ledger.TxHash]ledger.Receipt
}

func (l *staleIndex) TransactionReceipt(ctx context.Context, h ledger.TxHash) (ledger.Receipt, error) {
	if r, ok := l.stale[h]; ok {
		return r, nil
	}
	return l.WalletLedger.TransactionReceipt(ctx, h)
}

// A node whose index by hash answers receipts of blocks it lost, for
// transactions it has mined again elsewhere: their tasks are not taken for
// replaced (and sent a second time with new nonces); the blocks of their
// nonces show them mined, and they are done once.
func TestWallet_ANodeWhoseIndexIsStaleAfterLosingBlocksSendsNothingTwice(t *testing.T) {
	t.Parallel()
	e := finalEnv(t, 1)
	e.cfg.ReplacedAfter = 0
	tasks := e.sendAndMine(t, 3)
	e.requireDoneOnce(t, tasks...)
	stale := &staleIndex{WalletLedger: e.led, stale: map[ledger.TxHash]ledger.Receipt{}}
	for _, task := range tasks {
		h := ledger.TxHash(common.HexToHash(e.task(t, task).TxHash))
		r, err := e.chain.TransactionReceipt(t.Context(), h)
		require.NoError(t, err)
		r.BlockNumber += 7 // a block number the new chain reaches, with the lost block's hash
		stale.stale[h] = r
	}
	e.chain.SetReorgDropRate(1)
	_, err := e.chain.Reorg(1)
	require.NoError(t, err)
	_, e.pool = e.newProcess(t, stale)
	for range 12 {
		e.mineAndFollow(t)
	}
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, tasks...))
	e.requireOneTxPerNonce(t, 0)
	for _, task := range tasks {
		require.Len(t, e.attempts(t, task), 1, "never signed again")
		require.Zero(t, e.task(t, task).Replacements)
	}
}
