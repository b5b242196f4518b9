package queuer_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/core/vm"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/queuer"
)

// The pool takes exactly what the chain's EVM executes, as far as the
// protocol rules decide (the sender's nonce and funds aside): each
// transaction below is offered to the intake and, from its own funded
// account, executed by the JAM chain's EVM in one package. The intake
// refuses those the EVM skips, with geth's error, and takes those it
// executes.
func TestPoolIntake_RefusesExactlyWhatTheChainsEVMRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c := builder.Defaults()
	// Larger than the largest init code, so that the init-code rule, not
	// the pool's size limit, decides.
	c.Pool.MaxTxSize = 64 << 10
	intake := newPoolIntake(t, c, clk)
	chainID := big.NewInt(c.Pool.ChainID)
	to := common.HexToAddress("0xb2")
	zeros := make([]byte, 31<<10)

	for _, tc := range []struct {
		name string
		tx   types.TxData
		// refused is geth's error for a refused transaction, nil for one
		// the chain executes; msg, when set, the intake's whole message.
		refused error
		msg     string
	}{
		{name: "a transfer", tx: &types.DynamicFeeTx{Gas: 21000, To: &to, Value: common.Big1}},
		{name: "legacy", tx: &types.LegacyTx{GasPrice: big.NewInt(2e9), Gas: 21000, To: &to}},
		{name: "access list", tx: &types.AccessListTx{ChainID: chainID, GasPrice: big.NewInt(2e9), Gas: 21000 + 2400 + 1900, To: &to,
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}}}},
		{name: "intrinsic gas too low", tx: &types.DynamicFeeTx{Gas: 20999, To: &to}, refused: core.ErrIntrinsicGas},
		// EIP-7623 (Prague): 31 KiB of zero bytes cost 21000 + 4 a byte,
		// but must pay for 21000 + 10 a byte.
		{name: "calldata under its floor", tx: &types.DynamicFeeTx{Gas: 21000 + 4*31<<10 + 100, To: &to, Data: zeros},
			refused: core.ErrFloorDataGas, msg: "insufficient gas for floor data gas cost: gas 148076, minimum needed 338440"},
		{name: "calldata at its floor", tx: &types.DynamicFeeTx{Gas: 21000 + 10*31<<10, To: &to, Data: zeros}},
		// EIP-7825 (Osaka): no transaction may have a gas limit above 2^24.
		{name: "gas over the transaction cap", tx: &types.DynamicFeeTx{Gas: params.MaxTxGas + 1, To: &to},
			refused: core.ErrGasLimitTooHigh, msg: "transaction gas limit too high (cap: 16777216, tx: 16777217)"},
		{name: "gas at the transaction cap", tx: &types.DynamicFeeTx{Gas: params.MaxTxGas, To: &to}},
		// EIP-3860 (Shanghai): init code of at most 49152 bytes.
		{name: "init code too large", tx: &types.DynamicFeeTx{Gas: 1_000_000, Data: make([]byte, params.MaxInitCodeSize+1)},
			refused: vm.ErrMaxInitCodeSizeExceeded},
		{name: "init code at its limit", tx: &types.DynamicFeeTx{Gas: 1_000_000, Data: make([]byte, params.MaxInitCodeSize)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key, err := crypto.GenerateKey()
			require.NoError(t, err)
			if d, ok := tc.tx.(*types.DynamicFeeTx); ok {
				d.ChainID, d.GasFeeCap, d.GasTipCap = chainID, big.NewInt(2e9), big.NewInt(1e9)
			}
			tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), tc.tx)
			require.NoError(t, err)
			raw, err := tx.MarshalBinary()
			require.NoError(t, err)

			_, intakeErr := intake.DecodePoolTx(raw)
			skipped, reason := executeOnJAM(ctx, t, clk.Now(), c.Pool.ChainID, key, raw)

			if tc.refused == nil {
				require.NoError(t, intakeErr)
				require.False(t, skipped, "the chain skipped it: %s", reason)
				return
			}
			require.ErrorIs(t, intakeErr, tc.refused)
			if tc.msg != "" {
				require.EqualError(t, intakeErr, tc.msg)
			}
			require.True(t, skipped, "the chain executed it")
			require.Contains(t, reason, tc.refused.Error())
		})
	}
}

// executeOnJAM runs raw, signed by key, as the first package of a new JAM
// chain (chain id chainID, genesis at genesis, key funded) and reports
// whether its EVM skipped it and why.
func executeOnJAM(ctx context.Context, t *testing.T, genesis time.Time, chainID int64, key *ecdsa.PrivateKey, raw []byte) (bool, string) {
	t.Helper()
	clk := clock.NewFake(genesis)
	chain := jam.New(jam.Config{Clock: clk, ChainID: chainID,
		Alloc: map[common.Address]*big.Int{crypto.PubkeyToAddress(key.PublicKey): big.NewInt(params.Ether)}})
	t.Cleanup(func() { _ = chain.Close() })
	info, err := chain.Info(ctx)
	require.NoError(t, err)
	recent, err := chain.RecentBlocks(ctx)
	require.NoError(t, err)
	require.NoError(t, chain.SubmitWorkPackage(ctx, ledger.WorkPackage{
		Number: info.Executed.Number + 1, Parent: info.Executed.Hash, Version: 1, Anchor: recent[len(recent)-1], Txs: [][]byte{raw},
	}))
	// Guaranteed in the next slot, accumulated (executed) in the one after.
	clk.Advance(2 * jam.DefaultSlotLength)
	ex := chain.Executions()
	require.Len(t, ex, 1, "the package did not execute")
	require.LessOrEqual(t, len(ex[0].Skipped), 1)
	if len(ex[0].Skipped) == 0 {
		return false, ""
	}
	return true, ex[0].Skipped[0].Reason
}

func newPoolIntake(t *testing.T, c builder.Config, clk clock.Clock) *queuer.PoolIntake {
	t.Helper()
	intake, err := queuer.NewPoolIntake(c, clk)
	require.NoError(t, err)
	return intake
}
