package console

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestConsole_TheWalletPageShowsItsPolicyAndTheSpendInEachWindow(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	require.Contains(t, b.get("/ui/wallets/main").Body.String(), "No policy: the wallet may send any value anywhere.")

	_, err := fx.st.WalletPolicyPut(t.Context(), store.WalletPolicyPutParams{Now: fx.clock.Now(), Wallet: "main", Audit: &store.AuditEntry{KeyName: "ops"},
		Policy: store.WalletPolicy{
			Recipients:    []string{testfactory.WalletTo},
			Contracts:     map[string]map[string]string{"0x00000000000000000000000000000000000000d1": {"0xa9059cbb": "transfer(address,uint256)"}},
			MaxValuePerTx: big.NewInt(500),
			ValueCaps:     []store.PolicyCap{{Window: 24 * time.Hour, Max: big.NewInt(1000)}},
			FeeCaps:       []store.PolicyCap{{Window: time.Hour, Max: big.NewInt(1_000_000_000_000_000)}},
		}})
	require.NoError(t, err)
	fx.f.PostTask(testfactory.Task{Sender: fx.sender, Request: store.TaskRequest{Value: big.NewInt(300)}})
	_, _, err = fx.st.TaskInsert(t.Context(), store.TaskInsertParams{Now: fx.clock.Now(), Wallet: "main", ChainID: fx.wallet.ChainID, Sender: fx.sender,
		Request: store.TaskRequest{To: testfactory.WalletTo, Value: big.NewInt(900)}})
	var refused *store.PolicyRefusedError
	require.ErrorAs(t, err, &refused)

	page := b.get("/ui/wallets/main").Body.String()
	require.Contains(t, page, `<section class="card" id="policy">`)
	require.Contains(t, page, "Set by ops through the API")
	require.Contains(t, page, `<code class="wrap">`+testfactory.WalletTo+`</code>`)
	require.Contains(t, page, `<code class="wrap">0x00000000000000000000000000000000000000d1</code>: <code>transfer(address,uint256)</code>`)
	require.Contains(t, page, "<dt>Largest value</dt><dd>500 wei</dd>")
	require.Contains(t, page, "<tr><td>value</td><td>24h0m0s</td><td>300</td><td>1000</td></tr>")
	// The started task's transaction is in flight: 21000 gas at 2 gwei.
	require.Contains(t, page, "<tr><td>fees</td><td>1h0m0s</td><td>42000000000000</td><td>1000000000000000</td></tr>")
	require.Contains(t, page, "<td>max_value</td>")
}
