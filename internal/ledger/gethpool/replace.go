// Package gethpool holds the rules of go-ethereum's transaction pool that
// ledgerq applies itself: the replacement rule, which the builder lane's pool
// (store.PoolAdd), the wallet lane's gas bumps (monitor) and the simulated
// EVM chain (evmsim) all follow, as geth decides it in
// core/txpool/legacypool/list.go. geth keeps that rule in an unexported
// method, so it is restated here, once, and a test holds it to geth's own
// pool.
//
// It is a leaf beneath ledger: it imports only math/big, so the store, the
// role packages and the simulated chains can all use it without a cycle and
// without the store importing a ledger adapter.
package gethpool

import "math/big"

// PriceBump is geth's default price bump (legacypool.DefaultConfig.PriceBump,
// --txpool.pricebump), in percent.
const PriceBump = 10

// Fees are what a transaction offers per gas: its fee cap (max fee per gas;
// a legacy transaction's gas price) and its tip (max priority fee per gas;
// a legacy transaction's gas price too).
type Fees struct {
	FeeCap, Tip *big.Int
}

// Replaces reports whether a transaction offering next may replace one
// offering old at the same nonce in a geth pool with the given price bump
// (in percent), as geth's legacy pool decides it: the new fee cap and the
// new tip are each strictly above the old ones and at least
// old × (100 + bump) / 100 in integer division. So at a threshold that is
// not whole, its integer part is enough (a tip of 111 wei replaces one of
// 101, whose threshold is 111.1), and an unchanged price never replaces,
// not even a zero tip a zero tip.
func Replaces(next, old Fees, bump uint64) bool {
	return above(next.FeeCap, old.FeeCap, bump) && above(next.Tip, old.Tip, bump)
}

// above reports whether v > old and v ≥ old × (100 + bump) / 100.
func above(v, old *big.Int, bump uint64) bool {
	if v.Cmp(old) <= 0 {
		return false
	}
	threshold := new(big.Int).Mul(old, new(big.Int).SetUint64(100+bump))
	threshold.Quo(threshold, big.NewInt(100))
	return v.Cmp(threshold) >= 0
}
