package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/policy"
)

const token = "0x00000000000000000000000000000000000000D1"

func TestSelector_ASignatureIsItsKeccakSelectorAndASelectorIsItself(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]string{
		"transfer(address,uint256)":      {"0xa9059cbb", "transfer(address,uint256)"},
		"transfer(address, uint)":        {"0xa9059cbb", "transfer(address,uint256)"},
		"approve(address,uint256)":       {"0x095ea7b3", "approve(address,uint256)"},
		"0xA9059CBB":                     {"0xa9059cbb", ""},
		"f((uint256,address)[],bytes32)": {"", "f((uint256,address)[],bytes32)"},
	} {
		sel, sig, err := policy.Selector(in)
		require.NoError(t, err, in)
		if want[0] != "" {
			require.Equal(t, want[0], sel, in)
		}
		require.Regexp(t, `^0x[0-9a-f]{8}$`, sel)
		require.Equal(t, want[1], sig, in)
	}
	for _, bad := range []string{"transfer", "0xa9059c", "transfer(address,", "transfer(addres,uint256)"} {
		_, _, err := policy.Selector(bad)
		require.Error(t, err, bad)
	}
}

func TestSpec_APolicyIsStoredNormalisedAndReadBackAsGiven(t *testing.T) {
	t.Parallel()
	spec := policy.Spec{
		Recipients:    []string{"0x00000000000000000000000000000000000000C1", "0x00000000000000000000000000000000000000c1"},
		Contracts:     []policy.ContractSpec{{Address: token, Functions: []string{"transfer(address, uint256)", "0x095EA7B3"}}, {Address: "0x00000000000000000000000000000000000000d2"}},
		MaxValuePerTx: "1000",
		ValueCaps:     []policy.CapSpec{{Window: "24h", Max: "5000"}},
	}
	p, err := spec.Policy()
	require.NoError(t, err)
	require.Equal(t, []string{"0x00000000000000000000000000000000000000c1"}, p.Recipients, "lower-case, once")
	require.Equal(t, map[string]map[string]string{
		"0x00000000000000000000000000000000000000d1": {"0xa9059cbb": "transfer(address,uint256)", "0x095ea7b3": ""},
		"0x00000000000000000000000000000000000000d2": nil,
	}, p.Contracts)
	back := policy.FromStore(p)
	require.Equal(t, []string{"0x095ea7b3", "transfer(address,uint256)"}, back.Contracts[0].Functions)
	require.Nil(t, back.Contracts[1].Functions)
	require.Equal(t, "24h0m0s", back.ValueCaps[0].Window)

	for field, s := range map[string]policy.Spec{
		"recipients[1]":             {Recipients: []string{"0x00000000000000000000000000000000000000c1", "nope"}},
		"contracts[0].functions[1]": {Contracts: []policy.ContractSpec{{Address: token, Functions: []string{"0x12345678", "x("}}}},
		"fee_caps[0].max":           {FeeCaps: []policy.CapSpec{{Window: "1h", Max: "0x10"}}},
		"value_caps[0].window":      {ValueCaps: []policy.CapSpec{{Window: "1500ms", Max: "1"}}},
	} {
		_, err := s.Policy()
		var bad *policy.Error
		require.ErrorAs(t, err, &bad, field)
		require.Equal(t, field, bad.Field)
	}
}

func TestParseDecl_ItsStringParsesBackToTheSamePolicy(t *testing.T) {
	t.Parallel()
	d, err := policy.ParseDecl("wallet=hot,recipient=0x00000000000000000000000000000000000000c1,function=" + token + ":transfer(address,uint256)," +
		"contract=0x00000000000000000000000000000000000000d2,max-value=7,value-cap=100/24h,fee-cap=5/1h")
	require.NoError(t, err)
	again, err := policy.ParseDecl(d.String())
	require.NoError(t, err)
	require.Equal(t, d, again)
	// contract= allows every function whatever function= says.
	d, err = policy.ParseDecl("wallet=hot,function=" + token + ":0xa9059cbb,contract=" + token)
	require.NoError(t, err)
	require.Nil(t, d.Spec.Contracts[0].Functions)
	_, err = policy.ParseDecl("wallet=,max-value=1")
	require.ErrorContains(t, err, "wallet")
}
