package ledgertest_test

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

// newWalletLedger is a WalletLedger in front of a simulated chain that
// mines only when told, with one funded sender: the ledger, the chain, a
// signer of the sender's transfers and the sender.
func newWalletLedger(t *testing.T) (*ledgertest.WalletLedger, *evmsim.Ledger, func(nonce uint64, value int64) []byte, common.Address) {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	chain := evmsim.New(evmsim.Config{ChainID: 1337, Alloc: map[common.Address]*big.Int{from: big.NewInt(1e18)}})
	sign := func(nonce uint64, value int64) []byte {
		to := common.Address{0xaa}
		id := big.NewInt(1337)
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
			ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(2e9), GasFeeCap: big.NewInt(10e9), Gas: 21000, To: &to, Value: big.NewInt(value),
		})
		require.NoError(t, err)
		raw, err := tx.MarshalBinary()
		require.NoError(t, err)
		return raw
	}
	return ledgertest.NewWalletLedger(chain), chain, sign, from
}

func TestWalletLedger_AnswersAsTheLedgerBehindItCountingEveryCallAndRecordingEverySend(t *testing.T) {
	t.Parallel()
	l, chain, sign, from := newWalletLedger(t)
	ctx := t.Context()
	addr := ledger.Address(from)

	id, err := l.ChainID(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1337), id.Int64())
	raw := sign(0, 1)
	require.NoError(t, l.SendRawTransaction(ctx, raw))
	pending, err := l.PendingNonceAt(ctx, addr)
	require.NoError(t, err)
	require.Equal(t, uint64(1), pending, "the send reached the chain")
	chain.Mine()
	nonce, err := l.NonceAt(ctx, addr)
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce)
	_, err = l.BalanceAt(ctx, addr)
	require.NoError(t, err)
	fees, err := l.SuggestFees(ctx)
	require.NoError(t, err)
	want, err := chain.SuggestFees(ctx)
	require.NoError(t, err)
	require.Equal(t, want, fees, "not raised unless asked")
	_, err = l.EstimateGas(ctx, ledger.CallMsg{From: addr, To: &ledger.Address{0xaa}, Value: big.NewInt(1)})
	require.NoError(t, err)
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(raw))
	rc, err := l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
	require.NoError(t, err)
	require.True(t, rc.Found)
	head, err := l.HeadBlock(ctx)
	require.NoError(t, err)
	_, found, err := l.BlockAt(ctx, head.Number)
	require.NoError(t, err)
	require.True(t, found)
	txs, found, err := l.TxsAtNonce(ctx, addr, 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, txs, 1)

	for _, m := range []string{"ChainID", "SendRawTransaction", "PendingNonceAt", "NonceAt", "BalanceAt", "SuggestFees",
		"EstimateGas", "TransactionReceipt", "HeadBlock", "BlockAt", "TxsAtNonce"} {
		require.Equal(t, 1, l.Calls(m), m)
	}
	require.Equal(t, 11, l.TotalCalls())
	require.Equal(t, []ledgertest.Send{{From: from, Nonce: 0, Hash: tx.Hash().Hex(), Raw: raw}}, l.Sends())
	require.Equal(t, map[common.Address]map[uint64]map[string]bool{from: {0: {tx.Hash().Hex(): true}}}, l.HashesPerNonce())
}

func TestWalletLedger_FailsRefusesAndRaisesAsScripted(t *testing.T) {
	t.Parallel()
	l, chain, sign, from := newWalletLedger(t)
	ctx := t.Context()
	addr := ledger.Address(from)

	refused := ledger.NewSendError(ledger.SendRejected, "insufficient funds", nil)
	var before []uint64
	l.BeforeSend = func(tx *types.Transaction) { before = append(before, tx.Nonce()) }
	l.Refuse = func(tx *types.Transaction) error {
		if tx.Value().Int64() == 666 {
			return refused
		}
		return nil
	}
	require.ErrorIs(t, l.SendRawTransaction(ctx, sign(0, 666)), refused)
	pending, err := chain.PendingNonceAt(ctx, addr)
	require.NoError(t, err)
	require.Zero(t, pending, "a refused send does not reach the chain")
	raw := sign(0, 1)
	require.NoError(t, l.SendRawTransaction(ctx, raw))
	require.Equal(t, []uint64{0, 0}, before, "BeforeSend runs before every send, refused or not")
	sends := l.Sends()
	require.Len(t, sends, 2)
	require.ErrorIs(t, sends[0].Err, refused)
	require.NoError(t, sends[1].Err)

	chain.Mine()
	require.NoError(t, l.SendRawTransaction(ctx, raw), "the simulated chain knows a mined transaction")
	l.MinedIsNonceTooLow = true
	err = l.SendRawTransaction(ctx, raw)
	require.Equal(t, ledger.SendNonceTooLow, ledger.SendResultOf(err), "as geth answers")

	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(raw))
	l.FailReceipt = func(h string) bool { return h == tx.Hash().Hex() }
	_, err = l.TransactionReceipt(ctx, ledger.TxHash(tx.Hash()))
	require.Error(t, err)
	_, err = l.TransactionReceipt(ctx, ledger.TxHash{1})
	require.NoError(t, err, "another hash is looked up")
	l.FailBlocks = true
	_, _, err = l.TxsAtNonce(ctx, addr, 0)
	require.Error(t, err)

	estimateErr := errors.New("execution reverted")
	l.EstimateErr = func(ledger.CallMsg) error { return estimateErr }
	_, err = l.EstimateGas(ctx, ledger.CallMsg{From: addr})
	require.ErrorIs(t, err, estimateErr)

	l.RaiseFees = true
	suggested := 0
	l.OnSuggestFees = func() { suggested++ }
	want, err := chain.SuggestFees(ctx)
	require.NoError(t, err)
	for i := range int64(2) {
		got, err := l.SuggestFees(ctx)
		require.NoError(t, err)
		require.Equal(t, new(big.Int).Add(want.TipCap, big.NewInt(i+1)), got.TipCap)
		require.Equal(t, new(big.Int).Add(want.FeeCap, big.NewInt(i+1)), got.FeeCap)
	}
	require.Equal(t, 2, suggested)

	err = l.SendRawTransaction(ctx, []byte("not a transaction"))
	require.Error(t, err, "the chain's answer to bytes that are no transaction")
	last := l.Sends()[len(l.Sends())-1]
	require.Equal(t, ledgertest.Send{Raw: []byte("not a transaction"), Err: err}, last)
}

func TestWalletLedger_DownAnswersEveryCallWithItsErrorUntilItReturnsNil(t *testing.T) {
	t.Parallel()
	l, chain, sign, from := newWalletLedger(t)
	ctx := t.Context()
	addr := ledger.Address(from)
	unreachable := errors.New("dial tcp 127.0.0.1:8545: connection refused")
	down := true
	l.Down = func() error {
		if down {
			return unreachable
		}
		return nil
	}
	calls := map[string]func() error{
		"ChainID":            func() error { _, err := l.ChainID(ctx); return err },
		"PendingNonceAt":     func() error { _, err := l.PendingNonceAt(ctx, addr); return err },
		"NonceAt":            func() error { _, err := l.NonceAt(ctx, addr); return err },
		"BalanceAt":          func() error { _, err := l.BalanceAt(ctx, addr); return err },
		"EstimateGas":        func() error { _, err := l.EstimateGas(ctx, ledger.CallMsg{From: addr}); return err },
		"SuggestFees":        func() error { _, err := l.SuggestFees(ctx); return err },
		"TransactionReceipt": func() error { _, err := l.TransactionReceipt(ctx, ledger.TxHash{1}); return err },
		"HeadBlock":          func() error { _, err := l.HeadBlock(ctx); return err },
		"BlockAt":            func() error { _, _, err := l.BlockAt(ctx, 0); return err },
		"TxsAtNonce":         func() error { _, _, err := l.TxsAtNonce(ctx, addr, 0); return err },
		"TxsInBlock":         func() error { _, _, err := l.TxsInBlock(ctx, addr, 0); return err },
		"SendRawTransaction": func() error { return l.SendRawTransaction(ctx, sign(0, 1)) },
	}
	for method, call := range calls {
		require.ErrorIs(t, call(), unreachable, method)
		require.Equal(t, 1, l.Calls(method), "%s is counted", method)
	}
	pending, err := chain.PendingNonceAt(ctx, addr)
	require.NoError(t, err)
	require.Zero(t, pending, "a send while down does not reach the chain")

	down = false
	for method, call := range calls {
		require.NoError(t, call(), "%s once it answers again", method)
	}
}

// A lagging read answers as of Blocks blocks before the head: the older
// head, no block or receipt above it, the older nonce, no transaction at a
// nonce it had not reached; the next reads answer as the chain does again.
func TestWalletLedger_ALaggingReadAnswersAsOfBlocksAgo(t *testing.T) {
	t.Parallel()
	l, chain, sign, from := newWalletLedger(t)
	ctx := t.Context()
	addr := ledger.Address(from)
	for n := range uint64(3) {
		require.NoError(t, l.SendRawTransaction(ctx, sign(n, 1)))
		chain.Mine() // nonce n in block n+1
	}
	last, err := chain.TransactionReceipt(ctx, ledger.TxHash(mustHash(t, sign(2, 1))))
	require.NoError(t, err)
	require.True(t, last.Found)

	l.SetLag(ledgertest.Lag{Blocks: 2, Next: 6})
	head, err := l.HeadBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, head.Number)
	_, found, err := l.BlockAt(ctx, 2)
	require.NoError(t, err)
	require.False(t, found, "no block above the lagging head")
	rc, err := l.TransactionReceipt(ctx, ledger.TxHash(mustHash(t, sign(2, 1))))
	require.NoError(t, err)
	require.False(t, rc.Found, "no receipt in a block above it")
	nonce, err := l.NonceAt(ctx, addr)
	require.NoError(t, err)
	require.EqualValues(t, 1, nonce)
	_, found, err = l.TxsAtNonce(ctx, addr, 1)
	require.NoError(t, err)
	require.False(t, found)
	_, found, err = l.TxsInBlock(ctx, addr, 3)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, 6, l.Lagged())

	head, err = l.HeadBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, head.Number, "the next reads are the chain's")
	nonce, err = l.NonceAt(ctx, addr)
	require.NoError(t, err)
	require.EqualValues(t, 3, nonce)

	l.SetLag(ledgertest.Lag{Blocks: 2, Next: 1, Only: []string{"NonceAt"}})
	head, err = l.HeadBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, head.Number, "only the nonce lags")
	nonce, err = l.NonceAt(ctx, addr)
	require.NoError(t, err)
	require.EqualValues(t, 1, nonce)
}

func mustHash(t *testing.T, raw []byte) common.Hash {
	t.Helper()
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(raw))
	return tx.Hash()
}
