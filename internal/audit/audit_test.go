package audit_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const (
	chainID     = int64(1337)
	blockPeriod = time.Second
)

// lane is one funded wallet served by the wallet lane on the in-process
// simulated chain, as node wires it, on a fake clock.
type lane struct {
	db       *testdb.DB
	clk      *clock.Fake
	chain    *evmsim.Ledger
	key      *ecdsa.PrivateKey
	w        keystore.Wallet
	rows     *testfactory.Factory
	pool     *workers.Scheduler
	follower *monitor.WalletFollower
	tasks    []store.Task
}

func setup(t *testing.T) *lane {
	t.Helper()
	l := &lane{db: testdb.New(t), clk: testfactory.NewClock()}
	var err error
	l.key, err = crypto.GenerateKey()
	require.NoError(t, err)
	signer, err := keystore.NewKeySigner(l.key)
	require.NoError(t, err)
	l.w = keystore.Wallet{ID: "w0", ChainID: chainID, Signer: signer}
	l.chain = evmsim.New(evmsim.Config{Clock: l.clk, ChainID: chainID, BlockPeriod: blockPeriod,
		Alloc: map[common.Address]*big.Int{l.addr(): new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))}})
	reg, err := keystore.NewRegistry(l.w)
	require.NoError(t, err)
	st := l.db.Store
	cfg := wallet.Defaults()
	cfg.Clock, cfg.SendLinger = l.clk, 0
	broadcast, err := submitter.NewWalletBroadcaster(st, cfg)
	require.NoError(t, err)
	confirm, err := monitor.NewWalletConfirmer(st, l.chain, cfg)
	require.NoError(t, err)
	keep, err := monitor.NewWalletKeeper(st, l.chain, cfg)
	require.NoError(t, err)
	send, err := queuer.NewWalletSender(st, l.chain, cfg)
	require.NoError(t, err)
	job, err := wallet.NewJob(st, l.chain, reg, cfg, wallet.Steps{Recover: broadcast, Confirm: confirm, KeepMoving: keep, Send: send})
	require.NoError(t, err)
	wcfg := workers.Defaults()
	wcfg.Workers = 1
	l.pool, err = workers.NewScheduler(st, loop.Deps{Clock: l.clk}, wcfg, map[string]workers.Job{wallet.Kind: job})
	require.NoError(t, err)
	l.follower, err = monitor.NewWalletFollower(st, reg, cfg)
	require.NoError(t, err)
	l.rows = testfactory.New(t, st, l.clk)
	return l
}

func (l *lane) addr() common.Address { return common.Address(l.w.Address()) }

// post stores n tasks, each paying its own recipient.
func (l *lane) post(t *testing.T, n int) {
	t.Helper()
	for range n {
		l.clk.Advance(time.Microsecond)
		i := len(l.tasks)
		l.tasks = append(l.tasks, l.rows.PostTask(testfactory.Task{
			Wallet: l.w.ID, ChainID: chainID, Sender: l.w.Address().Hex(),
			Request: store.TaskRequest{To: common.BigToAddress(big.NewInt(int64(0x7000 + i))).Hex(), Value: big.NewInt(int64(1000 + i))},
		}))
	}
}

// drive runs the follower and the pool once per block until every task is
// done.
func (l *lane) drive(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for range 100 {
		done := 0
		for _, task := range l.tasks {
			got, err := l.db.Store.TaskGet(ctx, task.Wallet, task.ID)
			require.NoError(t, err)
			require.NotEqual(t, store.TaskError, got.Status, got.Error)
			if got.Status == store.TaskDone {
				done++
			}
		}
		if done == len(l.tasks) {
			return
		}
		_, err := l.follower.RunOnce(ctx)
		require.NoError(t, err)
		for {
			ran, err := l.pool.RunOnce(ctx)
			require.NoError(t, err)
			if !ran {
				break
			}
		}
		l.clk.Advance(blockPeriod)
	}
	t.Fatal("tasks not done after 100 blocks")
}

func (l *lane) audit(t *testing.T, led ledger.WalletLedger) audit.Report {
	t.Helper()
	rep, err := audit.Wallet(t.Context(), l.db.Store, led, audit.Params{ChainID: chainID, Address: l.w.Address()})
	require.NoError(t, err)
	t.Log(rep.Text())
	return rep
}

func (l *lane) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	tag, err := l.db.Store.Conns().Exec(t.Context(), sql, args...)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), sql)
}

// kinds are the kinds of the report's exceptions.
func kinds(rep audit.Report) []audit.Kind {
	out := []audit.Kind{}
	for _, f := range rep.Exceptions {
		out = append(out, f.Kind)
	}
	return out
}

func TestWallet_ALaneRunOnTheSimulatedChainHasNoException(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.post(t, 5)
	l.drive(t)
	l.post(t, 3)
	l.drive(t)

	rep := l.audit(t, l.chain)
	require.True(t, rep.OK(), rep.Text())
	require.Equal(t, 8, rep.Transactions)
	require.Equal(t, 8, rep.TaskTxs)
	require.Equal(t, 8, rep.DoneChecked)
	require.EqualValues(t, 0, rep.FirstNonce)
	require.EqualValues(t, 8, rep.ChainNonce)
	require.EqualValues(t, 8, *rep.NextNonce)
	require.Positive(t, rep.FromBlock, "the read starts at the wallet's first mined block")
}

func TestWallet_ADoneTaskWithAHashTheChainLacksIsAnException(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.post(t, 3)
	l.drive(t)
	forged := "0x" + common.Bytes2Hex(crypto.Keccak256([]byte("no such transaction")))
	l.exec(t, `UPDATE ledgerq.wallet_tasks SET tx_hash = $1 WHERE id = $2`, forged, l.tasks[1].ID)

	rep := l.audit(t, l.chain)
	require.Equal(t, []audit.Kind{audit.DoneNotOnChain}, kinds(rep))
	f := rep.Exceptions[0]
	require.Equal(t, l.tasks[1].ID, f.Task)
	require.Equal(t, forged, f.TxHash)
	require.Contains(t, f.What, "the chain holds the task's transaction")
	require.Equal(t, 2, rep.DoneChecked)
}

func TestWallet_ATransactionOfTheWalletNoAttemptExplainsIsAnException(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.post(t, 2)
	l.drive(t)
	id := big.NewInt(chainID)
	to := common.Address{0xee}
	tx, err := types.SignNewTx(l.key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: 2, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(20 * params.GWei),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, l.chain.SendRawTransaction(t.Context(), raw))
	l.clk.Advance(blockPeriod)

	rep := l.audit(t, l.chain)
	require.Equal(t, []audit.Kind{audit.Unexplained}, kinds(rep))
	require.Equal(t, tx.Hash().Hex(), common.HexToHash(rep.Exceptions[0].TxHash).Hex())
	require.EqualValues(t, 2, *rep.Exceptions[0].Nonce)
	require.Equal(t, 3, rep.Transactions)
}

func TestWallet_ANonceHoleIsAnException(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.post(t, 2)
	l.drive(t)
	l.exec(t, `UPDATE ledgerq.wallet_nonces SET next_nonce = 4 WHERE sender = $1`, l.w.Address().Hex())

	rep := l.audit(t, l.chain)
	require.Equal(t, []audit.Kind{audit.NonceHole}, kinds(rep))
	require.EqualValues(t, 2, *rep.Exceptions[0].Nonce)
	require.Contains(t, rep.Exceptions[0].What, "nonces 2 to 3 are")
}

// skipBlock is a node that answers one block without the wallet's
// transactions (a node that lost it from its index).
type skipBlock struct {
	ledger.WalletLedger
	block uint64
}

func (s skipBlock) TxsInBlock(ctx context.Context, addr ledger.Address, n uint64) ([]ledger.NonceTx, bool, error) {
	txs, found, err := s.WalletLedger.TxsInBlock(ctx, addr, n)
	if n == s.block {
		return nil, found, err
	}
	return txs, found, err
}

func TestWallet_ABlockReadWithoutItsTransactionsIsAnException(t *testing.T) {
	t.Parallel()
	l := setup(t)
	l.post(t, 1)
	l.drive(t)
	l.post(t, 1)
	l.drive(t)
	l.post(t, 1)
	l.drive(t)
	atts, err := l.db.Store.AttemptListByTask(t.Context(), l.tasks[1].ID)
	require.NoError(t, err)
	require.Len(t, atts, 1)

	rep := l.audit(t, skipBlock{WalletLedger: l.chain, block: uint64(*atts[0].MinedBlock)})
	require.Contains(t, kinds(rep), audit.ChainReadIncomplete)
	require.Contains(t, kinds(rep), audit.DoneNotOnChain)
}
