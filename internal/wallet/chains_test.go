package wallet_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

func TestChains_ADeclarationReadsEveryKeyAndRefusesWhatCannotWork(t *testing.T) {
	var l wallet.Chains
	require.NoError(t, l.Set("name=base,chain-id=8453,node=https://a.example/v3/KEY,node=https://b.example,send-only=https://relay.example,confirmations=20,price-cap=200000000000,min-tip=1000000,stall-timeout=2m,call-timeout=3s;name=dev,chain-id=1337,node=http://127.0.0.1:8545"))
	require.Len(t, l, 2)
	d := l[0]
	require.Equal(t, "base", d.Name)
	require.Equal(t, int64(8453), d.ChainID)
	require.Equal(t, []string{"https://a.example/v3/KEY", "https://b.example"}, d.Nodes)
	require.Equal(t, []string{"https://relay.example"}, d.SendOnly)
	require.Equal(t, 20, d.Confirmations)
	require.Equal(t, big.NewInt(200000000000), d.PriceCap)
	require.Equal(t, big.NewInt(1000000), d.MinTip)
	require.Equal(t, 2*time.Minute, d.StallTimeout)
	require.Equal(t, 3*time.Second, d.CallTimeout)
	require.NotContains(t, l.String(), "KEY", "the printed declaration hides node URLs")
	require.NoError(t, l.Validate())

	for _, bad := range []string{
		"chain-id=1,node=http://x",              // no name
		"name=x,node=http://x",                  // no chain id
		"name=x,chain-id=1",                     // no node
		"name=x,chain-id=1,node=ftp://x",        // not http
		"name=x,chain-id=1,node=http://x,foo=1", // unknown key
		"name=x,chain-id=1,node=http://x,confirmations=-1",
		"name=x,chain-id=1,node=http://x,min-tip=-5",
	} {
		var l wallet.Chains
		require.Error(t, l.Set(bad), bad)
	}
	dup := wallet.Chains{{Name: "a", ChainID: 1, Nodes: []string{"http://x"}}, {Name: "b", ChainID: 1, Nodes: []string{"http://y"}}}
	require.ErrorContains(t, dup.Validate(), "same chain id")
}

func TestChains_AChainsSettingsReplaceTheLanesWhereItSetsThem(t *testing.T) {
	base := wallet.Defaults()
	on := base.On(wallet.ChainDecl{Confirmations: 64, PriceCap: big.NewInt(5), StallTimeout: time.Minute, MinTip: big.NewInt(7)})
	require.Equal(t, 64, on.Confirmations)
	require.Equal(t, big.NewInt(5), on.PriceCap)
	require.Equal(t, time.Minute, on.StallTimeout)
	require.Equal(t, big.NewInt(7), on.MinTip)
	same := base.On(wallet.ChainDecl{})
	require.Equal(t, base.Confirmations, same.Confirmations)
	require.Equal(t, base.StallTimeout, same.StallTimeout)
}

func TestAtLeastTip_RaisesTheTipAndTheFeeCapByAsMuch(t *testing.T) {
	f := ledger.Fees{TipCap: big.NewInt(1), FeeCap: big.NewInt(2_000_000_001)}
	got := wallet.AtLeastTip(f, big.NewInt(1_000_000_000))
	require.Equal(t, big.NewInt(1_000_000_000), got.TipCap)
	require.Equal(t, big.NewInt(3_000_000_000), got.FeeCap)
	require.Equal(t, f, wallet.AtLeastTip(f, nil))
	require.Equal(t, f, wallet.AtLeastTip(f, big.NewInt(1)))
}

// A chain priced by a legacy gas price gets type-0 transactions whose price
// is the suggestion's base fee plus tip, and its tasks end done.
func TestWallet_OnALegacyPricedChainTasksAreLegacyTransactionsAtBaseFeePlusTip(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.Legacy = true }})
	task := e.post(t, 0, 0, 1000, nil)
	e.drive(t, e.pool, 20, task)
	e.requireDoneOnce(t, task)
	atts := e.attempts(t, task)
	require.NotEmpty(t, atts)
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(atts[0].Raw))
	require.Equal(t, uint8(types.LegacyTxType), tx.Type())
	fees, err := e.chain.SuggestFees(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, tx.GasPrice().Cmp(wallet.LegacyPrice(fees)), 0, "at least the base fee plus the tip")
	require.Negative(t, tx.GasPrice().Cmp(fees.FeeCap), "not the EIP-1559 cap of twice the base fee")
	require.Equal(t, big.NewInt(2_000_000_000), wallet.LegacyPrice(ledger.Fees{TipCap: big.NewInt(1_000_000_000), FeeCap: big.NewInt(3_000_000_000)}), "1 gwei base fee plus 1 gwei tip")
}

func TestChains_PricingAndBumpPercentAreTheChainsOwn(t *testing.T) {
	var l wallet.Chains
	require.NoError(t, l.Set("name=bsc,chain-id=56,node=https://bsc.example,pricing=legacy,bump-percent=15"))
	on := wallet.Defaults().On(l[0])
	require.True(t, on.Legacy)
	require.Equal(t, 15, on.BumpPercent)
	require.Equal(t, 20, wallet.Defaults().BumpPercent)
	require.Error(t, l.Set("name=x,chain-id=1,node=https://x,pricing=cheap"))
	require.Error(t, l.Set("name=x,chain-id=1,node=https://x,bump-percent=5"), "below geth's replacement rule")
}
