package wallet_test

import (
	"math/big"
	"testing"
	"time"

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
