package queuer

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

// The pool checks transactions as geth's own pool does (the size,
// minimum price, gas and value rules among them): for each case, checkPoolTx
// and go-ethereum's core/txpool.ValidateTransaction, on the chain's rules at
// the next block, accept it or refuse it with the same message.
func TestCheckPoolTx_RefusesWhatGethsPoolRefusesWithItsMessage(t *testing.T) {
	t.Parallel()
	c := builder.Defaults()
	// A block gas limit under the Osaka per-transaction cap, so that each
	// of the two has a case of its own.
	c.Pool.ChainID, c.Pool.MaxTxSize, c.Pool.BlockGasLimit = 4242, 64<<10, 10_000_000
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg, err := NewPoolIntake(c, clock.NewFake(now))
	require.NoError(t, err)
	chainID := big.NewInt(cfg.ChainID)
	chainConfig := jam.EVMChainConfig(cfg.ChainID)
	head := &types.Header{Number: big.NewInt(1), Difficulty: common.Big0, Time: uint64(now.Unix()), GasLimit: cfg.BlockGasLimit}
	opts := &txpool.ValidationOptions{
		Config: chainConfig, Accept: 1<<types.LegacyTxType | 1<<types.AccessListTxType | 1<<types.DynamicFeeTxType,
		MaxSize: uint64(cfg.MaxTxSize), MinTip: cfg.MinTip,
	}
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	to := common.HexToAddress("0xb2")
	gwei := big.NewInt(1_000_000_000)
	huge := new(big.Int).Lsh(common.Big1, 256)
	sign := func(chain *big.Int, data types.TxData) *types.Transaction {
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chain), data)
		require.NoError(t, err)
		return tx
	}
	dyn := func(mut func(*types.DynamicFeeTx)) *types.Transaction {
		d := &types.DynamicFeeTx{ChainID: chainID, GasFeeCap: big.NewInt(2e9), GasTipCap: gwei, Gas: 21000, To: &to, Value: common.Big1}
		mut(d)
		return sign(chainID, d)
	}
	for _, tc := range []struct {
		name string
		tx   *types.Transaction
	}{
		{"a transfer", dyn(func(*types.DynamicFeeTx) {})},
		{"legacy", sign(chainID, &types.LegacyTx{GasPrice: gwei, Gas: 21000, To: &to})},
		{"access list", sign(chainID, &types.AccessListTx{ChainID: chainID, GasPrice: gwei, Gas: 21000 + 2*2400 + 3*1900, To: &to,
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}, {2}}}, {Address: common.Address{9}, StorageKeys: []common.Hash{{3}}}}})},
		{"access list short of its gas", sign(chainID, &types.AccessListTx{ChainID: chainID, GasPrice: gwei, Gas: 21000 + 2400, To: &to,
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}}})},
		{"size over the limit", dyn(func(d *types.DynamicFeeTx) { d.Data = make([]byte, 70<<10); d.Gas = 2_000_000 })},
		{"tip below the minimum", dyn(func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(999_999_999) })},
		{"legacy price below the minimum", sign(chainID, &types.LegacyTx{GasPrice: big.NewInt(1), Gas: 21000, To: &to})},
		{"gas 0", dyn(func(d *types.DynamicFeeTx) { d.Gas = 0 })},
		{"calldata short of gas", dyn(func(d *types.DynamicFeeTx) { d.Data = []byte{0, 1, 0, 2}; d.Gas = 21000 + 4 + 16 + 4 + 15 })},
		{"calldata with its gas, short of its floor", dyn(func(d *types.DynamicFeeTx) { d.Data = []byte{0, 1, 0, 2}; d.Gas = 21000 + 4 + 16 + 4 + 16 })},
		{"calldata at its floor", dyn(func(d *types.DynamicFeeTx) { d.Data = []byte{0, 1, 0, 2}; d.Gas = 21000 + 10 + 40 + 10 + 40 })},
		{"creation with its gas", dyn(func(d *types.DynamicFeeTx) { d.To = nil; d.Data = make([]byte, 33); d.Gas = 53000 + 33*4 + 2*2 })},
		{"creation short of init code words", dyn(func(d *types.DynamicFeeTx) { d.To = nil; d.Data = make([]byte, 33); d.Gas = 53000 + 33*4 + 2 })},
		{"init code too large", dyn(func(d *types.DynamicFeeTx) { d.To = nil; d.Data = make([]byte, 49153); d.Gas = 10_000_000 })},
		{"gas over the block limit", dyn(func(d *types.DynamicFeeTx) { d.Gas = cfg.BlockGasLimit + 1 })},
		{"gas over the transaction cap", dyn(func(d *types.DynamicFeeTx) { d.Gas = params.MaxTxGas + 1 })},
		{"fee cap over 256 bits", dyn(func(d *types.DynamicFeeTx) { d.GasFeeCap = huge })},
		{"tip over 256 bits", dyn(func(d *types.DynamicFeeTx) { d.GasFeeCap, d.GasTipCap = huge, huge })},
		{"tip above the fee cap", dyn(func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(3e9) })},
		{"another chain", sign(common.Big1, &types.DynamicFeeTx{ChainID: common.Big1, GasFeeCap: gwei, GasTipCap: gwei, Gas: 21000, To: &to})},
		{"negative value", dyn(func(d *types.DynamicFeeTx) { d.Value = big.NewInt(-1) })},
		{"value over 256 bits", dyn(func(d *types.DynamicFeeTx) { d.Value = huge })},
	} {
		_, got := cfg.checkPoolTx(tc.tx)
		want := txpool.ValidateTransaction(tc.tx, head, types.LatestSigner(chainConfig), opts)
		if want == nil {
			require.NoError(t, got, tc.name)
			continue
		}
		require.EqualError(t, got, want.Error(), tc.name)
	}
}

// The intake's refusals are go-ethereum's error values (errors.Is), and a
// transaction over the size limit is the kind the API answers 413.
func TestDecodePoolTx_RefusalsAreGethsErrorValues(t *testing.T) {
	t.Parallel()
	c := builder.Defaults()
	c.Pool.ChainID, c.Pool.MaxTxSize, c.Pool.BlockGasLimit = 4242, 1024, 10_000_000
	cfg, err := NewPoolIntake(c, nil)
	require.NoError(t, err)
	chainID := big.NewInt(cfg.ChainID)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	to := common.HexToAddress("0xb2")
	raw := func(chain *big.Int, mut func(*types.DynamicFeeTx)) []byte {
		d := &types.DynamicFeeTx{ChainID: chain, GasFeeCap: big.NewInt(2e9), GasTipCap: big.NewInt(1e9), Gas: 21000, To: &to}
		mut(d)
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chain), d)
		require.NoError(t, err)
		b, err := tx.MarshalBinary()
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		kind RefusalKind
		is   error
	}{
		{"size over the limit", raw(chainID, func(d *types.DynamicFeeTx) { d.Data = make([]byte, 1100); d.Gas = 100_000 }), RefusedTooLarge, txpool.ErrOversizedData},
		{"tip below the minimum", raw(chainID, func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(1) }), RefusedInvalid, txpool.ErrTxGasPriceTooLow},
		{"gas 0", raw(chainID, func(d *types.DynamicFeeTx) { d.Gas = 0 }), RefusedInvalid, core.ErrIntrinsicGas},
		{"gas over the block limit", raw(chainID, func(d *types.DynamicFeeTx) { d.Gas = cfg.BlockGasLimit + 1 }), RefusedInvalid, txpool.ErrGasLimit},
		{"gas over the transaction cap", raw(chainID, func(d *types.DynamicFeeTx) { d.Gas = params.MaxTxGas + 1 }), RefusedInvalid, core.ErrGasLimitTooHigh},
		{"calldata under its floor", raw(chainID, func(d *types.DynamicFeeTx) { d.Data = make([]byte, 100); d.Gas = 21000 + 4*100 }), RefusedInvalid, core.ErrFloorDataGas},
		{"tip above the fee cap", raw(chainID, func(d *types.DynamicFeeTx) { d.GasTipCap = big.NewInt(3e9) }), RefusedInvalid, core.ErrTipAboveFeeCap},
		{"another chain", raw(common.Big1, func(*types.DynamicFeeTx) {}), RefusedInvalid, txpool.ErrInvalidSender},
		{"a nonce PostgreSQL's bigint cannot hold", raw(chainID, func(d *types.DynamicFeeTx) { d.Nonce = math.MaxInt64 }), RefusedInvalid, core.ErrNonceMax},
	} {
		_, err := cfg.DecodePoolTx(tc.raw)
		var r *Refusal
		require.ErrorAs(t, err, &r, tc.name)
		require.Equal(t, tc.kind, r.Kind, tc.name)
		require.ErrorIs(t, err, tc.is, tc.name)
	}
}

// The pool takes legacy, access-list and dynamic-fee transactions only: a
// set-code (EIP-7702) or blob (EIP-4844) transaction, valid on the chain's
// rules, is refused as a type the pool does not take, with geth's message.
func TestDecodePoolTx_RefusesSetCodeAndBlobTransactionsAsUnsupportedTypes(t *testing.T) {
	t.Parallel()
	c := builder.Defaults()
	cfg, err := NewPoolIntake(c, nil)
	require.NoError(t, err)
	chainID := uint256.NewInt(uint64(cfg.ChainID))
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	to := common.HexToAddress("0xb2")
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{ChainID: *chainID, Address: to, Nonce: 1})
	require.NoError(t, err)
	gwei := uint256.NewInt(1e9)
	for _, tc := range []struct {
		name string
		tx   types.TxData
		msg  string
	}{
		{"set code", &types.SetCodeTx{ChainID: chainID, GasTipCap: gwei, GasFeeCap: gwei, Gas: 100_000, To: to,
			AuthList: []types.SetCodeAuthorization{auth}}, "transaction type not supported: tx type 4 not supported by this pool"},
		{"blob", &types.BlobTx{ChainID: chainID, GasTipCap: gwei, GasFeeCap: gwei, Gas: 21000, To: to, BlobFeeCap: gwei,
			BlobHashes: []common.Hash{{1}}}, "transaction type not supported: tx type 3 not supported by this pool"},
	} {
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID.ToBig()), tc.tx)
		require.NoError(t, err, tc.name)
		raw, err := tx.MarshalBinary()
		require.NoError(t, err, tc.name)
		_, err = cfg.DecodePoolTx(raw)
		require.ErrorIs(t, err, core.ErrTxTypeNotSupported, tc.name)
		require.EqualError(t, err, tc.msg, tc.name)
	}
}
