package queuer

import (
	"math/big"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

func TestWalletTaskFees_TheRequestsFeesOrTheSuggestion(t *testing.T) {
	gwei := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e9)) }
	sugg := ledger.Fees{TipCap: gwei(5), FeeCap: gwei(25)} // 2 × base fee = 20 gwei
	for _, c := range []struct {
		name     string
		req      store.TaskRequest
		tip, cap *big.Int
	}{
		{"none: the suggestion", store.TaskRequest{}, gwei(5), gwei(25)},
		{"a tip: room for the base fee on top", store.TaskRequest{TipCap: gwei(1)}, gwei(1), gwei(21)},
		{"both", store.TaskRequest{TipCap: gwei(1), FeeCap: gwei(3)}, gwei(1), gwei(3)},
		{"a cap below the suggested tip lowers the tip", store.TaskRequest{FeeCap: gwei(3)}, gwei(3), gwei(3)},
	} {
		f := taskFees(c.req, sugg)
		if f.TipCap.Cmp(c.tip) != 0 || f.FeeCap.Cmp(c.cap) != 0 {
			t.Errorf("%s: tip %s cap %s, want %s %s", c.name, f.TipCap, f.FeeCap, c.tip, c.cap)
		}
	}
}
