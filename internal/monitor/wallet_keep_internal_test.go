package monitor

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
)

// A gas bump raises fee cap and tip by 1.2× (or to the node's suggestion),
// within the price cap; at the cap, it is a bump only when geth's
// replacement rule takes it: fee cap and tip each above the old and at
// least old × 110 / 100 in integer division.
func TestBumpFees_RaiseByOnePointTwoAndAtThePriceCapOnlyWhatGethsRuleTakes(t *testing.T) {
	t.Parallel()
	fees := func(feeCap, tip int64) gethpool.Fees {
		return gethpool.Fees{FeeCap: big.NewInt(feeCap), Tip: big.NewInt(tip)}
	}
	for _, tc := range []struct {
		name           string
		old, suggested gethpool.Fees
		limit          int64
		want           gethpool.Fees
		ok             bool
	}{
		{"1.2×", fees(101, 101), fees(1, 1), 0, fees(121, 121), true},
		{"the node's suggestion above 1.2×", fees(100, 10), fees(300, 50), 0, fees(300, 50), true},
		{"a zero tip raised to one wei", fees(10, 0), fees(0, 0), 0, fees(12, 1), true},
		{"the fee cap at least the tip", fees(100, 90), fees(0, 200), 0, fees(200, 200), true},
		{"at the cap: 101 to 111 wei, the threshold 111.1 rounds down", fees(101, 101), fees(1, 1), 111, fees(111, 111), true},
		{"at the cap: 101 to 110 wei is below the threshold", fees(101, 101), fees(1, 1), 110, fees(110, 110), false},
		{"at the cap: the fee cap held, the tip under it", fees(1000, 900), fees(1, 1), 1100, fees(1100, 1080), true},
		{"at the cap: 1000 to 1099 is below the threshold", fees(1000, 100), fees(1, 1), 1099, fees(1099, 120), false},
	} {
		var limit *big.Int
		if tc.limit > 0 {
			limit = big.NewInt(tc.limit)
		}
		got, ok := bumpFees(tc.old, tc.suggested, limit, 20)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want.FeeCap.String(), got.FeeCap.String(), tc.name)
		require.Equal(t, tc.want.Tip.String(), got.Tip.String(), tc.name)
	}
}

func TestBumpFees_RaiseByTheChainsBumpPercent(t *testing.T) {
	old := gethpool.Fees{FeeCap: big.NewInt(1000), Tip: big.NewInt(100)}
	got, ok := bumpFees(old, gethpool.Fees{FeeCap: big.NewInt(1), Tip: big.NewInt(1)}, nil, 50)
	if !ok || got.FeeCap.Int64() != 1500 || got.Tip.Int64() != 150 {
		t.Fatalf("bumpFees by 50%% = %v %v, %v; want 1500 and 150", got.FeeCap, got.Tip, ok)
	}
	got, ok = bumpFees(old, gethpool.Fees{FeeCap: big.NewInt(1), Tip: big.NewInt(1)}, nil, 10)
	if !ok || got.FeeCap.Int64() != 1100 || got.Tip.Int64() != 110 {
		t.Fatalf("bumpFees by 10%% = %v %v, %v; want 1100 and 110, which geth's rule takes", got.FeeCap, got.Tip, ok)
	}
}
