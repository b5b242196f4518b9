package httpapi_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"
)

// On a chain whose recent blocks are empty the EVM suggests a tip of 0 or
// 1 wei, while the pool admits no tip below its minimum: every fee hint
// /rpc gives is raised to what the pool admits, and a transaction built
// from any one of them, as ethers, viem and cast build theirs, is admitted.
func TestRPC_FeeHintsAreNeverBelowWhatThePoolAdmits(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ctx := t.Context()
	minTip := f.cfg.Pool.MinTip
	require.Equal(t, int64(gwei), minTip.Int64())
	f.evm.Answer("eth_gasPrice", `"0x8"`)
	f.evm.Answer("eth_maxPriorityFeePerGas", `"0x1"`)
	f.evm.Answer("eth_feeHistory", `{"oldestBlock":"0x1","baseFeePerGas":["0x7","0x7","0x7"],"gasUsedRatio":[0,0],"reward":[["0x0","0x0"],["0x0","0x1"]]}`)
	ec := f.dial()

	price, err := ec.SuggestGasPrice(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(gwei+7), price.Int64(), "the next block's base fee plus the pool's minimum tip")
	tip, err := ec.SuggestGasTipCap(ctx)
	require.NoError(t, err)
	require.Equal(t, minTip, tip)
	hist, err := ec.FeeHistory(ctx, 2, nil, []float64{25, 75})
	require.NoError(t, err)
	require.Len(t, hist.Reward, 2)
	for _, block := range hist.Reward {
		for _, r := range block {
			require.Equal(t, minTip, r, "every reward at least the pool's minimum tip")
		}
	}
	require.Equal(t, []*big.Int{big.NewInt(7), big.NewInt(7), big.NewInt(7)}, hist.BaseFee, "base fees are the chain's")
	require.Equal(t, []float64{0, 0}, hist.GasUsedRatio)

	key := newKey(t)
	base := hist.BaseFee[len(hist.BaseFee)-1]
	legacy := signTx(t, key, poolChainID, &types.LegacyTx{Nonce: 0, GasPrice: price, Gas: 21000, To: &poolRecipient, Value: big.NewInt(1)})
	byTip := signTx(t, key, poolChainID, &types.DynamicFeeTx{ChainID: big.NewInt(poolChainID), Nonce: 1, GasTipCap: tip,
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(base, big.NewInt(2)), tip), Gas: 21000, To: &poolRecipient, Value: big.NewInt(1)})
	// alloy's estimate (cast): the median reward of the history, base fee × 2 on top.
	reward := hist.Reward[0][0]
	byHistory := signTx(t, key, poolChainID, &types.DynamicFeeTx{ChainID: big.NewInt(poolChainID), Nonce: 2, GasTipCap: reward,
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(base, big.NewInt(2)), reward), Gas: 21000, To: &poolRecipient, Value: big.NewInt(1)})
	for _, tx := range []*types.Transaction{legacy, byTip, byHistory} {
		require.NoError(t, ec.SendTransaction(ctx, tx), "a transaction at ledgerq's own fee hint is admitted")
	}
}
