package gethpool_test

import (
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/state"
	"github.com/ethereum/go-ethereum/core/tracing"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/txpool/legacypool"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/trie"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool/gethpooltest"
)

func fees(feeCap, tip int64) gethpool.Fees {
	return gethpool.Fees{FeeCap: big.NewInt(feeCap), Tip: big.NewInt(tip)}
}

// geth's rule at the edges where a percentage alone misleads: fee cap and
// tip each strictly above the old ones and at least old × (100 + bump) / 100
// in integer division.
func TestReplaces_FeeCapAndTipStrictlyAboveAndAtTheThresholdRoundedDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		next, old gethpool.Fees
		bump      uint64
		replaces  bool
	}{
		{"tip 101 to 111: the threshold 111.1 rounds down", fees(1111, 111), fees(1010, 101), 10, true},
		{"tip 101 to 110", fees(1111, 110), fees(1010, 101), 10, false},
		{"fee cap 1001 to 1101: the threshold 1101.1 rounds down", fees(1101, 110), fees(1001, 100), 10, true},
		{"fee cap 1001 to 1100", fees(1100, 110), fees(1001, 100), 10, false},
		{"both +10 %", fees(1100, 110), fees(1000, 100), 10, true},
		{"both +5 %", fees(1050, 105), fees(1000, 100), 10, false},
		{"equal zero tips", fees(1100, 0), fees(1000, 0), 10, false},
		{"a zero tip raised by one wei", fees(1100, 1), fees(1000, 0), 10, true},
		{"equal fee caps", fees(1000, 200), fees(1000, 100), 10, false},
		{"equal tips", fees(2000, 100), fees(1000, 100), 10, false},
		{"9 to 10: the threshold 9.9 rounds down to 9", fees(10, 10), fees(9, 9), 10, true},
		{"fee cap 9 to 9: at the rounded threshold, not above the old", fees(9, 6), fees(9, 5), 10, false},
		{"zero to one wei", fees(1, 1), fees(0, 0), 10, true},
		{"a lower fee cap", fees(999, 200), fees(1000, 100), 10, false},
		{"bump 0: one wei more in each", fees(1001, 101), fees(1000, 100), 0, true},
		{"bump 0: equal", fees(1000, 100), fees(1000, 100), 0, false},
		{"bump 25: 101 to 126 (126.25 rounds down)", fees(126, 126), fees(101, 101), 25, true},
		{"bump 25: 101 to 125", fees(125, 125), fees(101, 101), 25, false},
	} {
		require.Equal(t, tc.replaces, gethpool.Replaces(tc.next, tc.old, tc.bump), tc.name)
	}
}

// The rule is geth's own: on a grid around each threshold, Replaces and
// go-ethereum's legacy pool (core/txpool/legacypool) with its default price
// bump take and refuse the same replacements.
func TestReplaces_AgreesWithGethsPool(t *testing.T) {
	t.Parallel()
	require.Equal(t, legacypool.DefaultConfig.PriceBump, uint64(gethpool.PriceBump), "geth's default price bump")

	type pair struct{ next, old gethpool.Fees }
	around := func(old int64) []int64 {
		th := old * (100 + gethpool.PriceBump) / 100
		var out []int64
		for _, v := range []int64{old - 1, old, old + 1, th - 1, th, th + 1} {
			if v >= 0 && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
	var pairs []pair
	for _, old := range []struct{ feeCap, tip int64 }{{0, 0}, {9, 0}, {9, 9}, {10, 5}, {101, 0}, {101, 101}, {1001, 101}, {1_000_000_001, 99}} {
		for _, fc := range around(old.feeCap) {
			for _, tip := range around(old.tip) {
				if tip <= fc && (fc != old.feeCap || tip != old.tip) { // the same fees would be the same bytes
					pairs = append(pairs, pair{next: fees(fc, tip), old: fees(old.feeCap, old.tip)})
				}
			}
		}
	}

	config := params.TestChainConfig
	signer := types.LatestSigner(config)
	keys := make([]*ecdsa.PrivateKey, len(pairs))
	db, err := state.New(types.EmptyRootHash, state.NewDatabaseForTesting())
	require.NoError(t, err)
	for i := range keys {
		keys[i], err = crypto.GenerateKey()
		require.NoError(t, err)
		db.AddBalance(crypto.PubkeyToAddress(keys[i].PublicKey), uint256.NewInt(params.Ether), tracing.BalanceChangeUnspecified)
	}
	chain := &testChain{config: config, state: db}
	pool := legacypool.New(legacypool.DefaultConfig, chain)
	require.NoError(t, pool.Init(0, chain.CurrentBlock(), txpool.NewReservationTracker().NewHandle(0)))
	t.Cleanup(func() { _ = pool.Close() })

	to := common.Address{0xb2}
	sign := func(key *ecdsa.PrivateKey, f gethpool.Fees) *types.Transaction {
		tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{
			ChainID: config.ChainID, GasFeeCap: f.FeeCap, GasTipCap: f.Tip, Gas: 21000, To: &to,
		})
		require.NoError(t, err)
		return tx
	}
	var differ []string
	took := 0
	for i, p := range pairs {
		name := fmt.Sprintf("from %s/%s to %s/%s", p.old.FeeCap, p.old.Tip, p.next.FeeCap, p.next.Tip)
		require.NoError(t, pool.Add([]*types.Transaction{sign(keys[i], p.old)}, true)[0], name)
		err := pool.Add([]*types.Transaction{sign(keys[i], p.next)}, true)[0]
		if err != nil {
			require.ErrorIs(t, err, txpool.ErrReplaceUnderpriced, name)
		}
		if err == nil {
			took++
		}
		if ours := gethpool.Replaces(p.next, p.old, gethpool.PriceBump); ours != (err == nil) {
			differ = append(differ, fmt.Sprintf("%s: Replaces says %v, geth's pool %v", name, ours, err))
		}
	}
	require.Empty(t, differ, "of %d replacements", len(pairs))
	require.True(t, took > 0 && took < len(pairs), "geth's pool took %d of %d: the grid tries both sides of the rule", took, len(pairs))
}

// testChain is the least of a chain geth's legacy pool needs: a head and
// its state.
type testChain struct {
	config *params.ChainConfig
	state  *state.StateDB
}

func (c *testChain) Config() *params.ChainConfig { return c.config }

func (c *testChain) CurrentBlock() *types.Header {
	return &types.Header{Number: new(big.Int), Difficulty: common.Big0, GasLimit: 30_000_000}
}

func (c *testChain) GetBlock(common.Hash, uint64) *types.Block {
	return types.NewBlock(c.CurrentBlock(), nil, nil, trie.NewStackTrie(nil))
}

func (c *testChain) StateAt(common.Hash, *big.Int, uint64) (*state.StateDB, error) {
	return c.state, nil
}

// The edge cases the pool and the simulated chain are tested on are geth's
// answers: Replaces gives each, and Replaces agrees with geth's pool.
func TestReplaces_TheSharedEdgeCasesAreGethsAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range gethpooltest.Edges {
		require.Equal(t, tc.Replaces, gethpool.Replaces(fees(tc.FeeCap, tc.Tip), fees(tc.OldFeeCap, tc.OldTip), gethpool.PriceBump), tc.Name)
	}
}
