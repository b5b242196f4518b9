package node_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// On a real geth --dev, with TestToken deployed and a policy from the
// configuration (--wallet-policy) that allows the token's transfer by its
// signature and nothing else: a transfer by signature is mined and moves
// the tokens; a call of another function of the token (approve) and a plain
// transfer to an address the policy does not list are 403 naming the rule,
// store no task, and send nothing: the wallet's nonce on the chain, and in
// the node's pool, is the one the allowed transfer left.
func TestWalletPolicy_OnGethAnAllowedTransferIsMinedAndADisallowedCallIs403AndSendsNothing(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t)
	client := n.Client()
	deployer, err := crypto.GenerateKey()
	require.NoError(t, err)
	n.Fund(t, crypto.PubkeyToAddress(deployer.PublicKey), big.NewInt(params.Ether))
	signer := testfactory.NewSigner(t)
	holder := common.Address(signer.Address())
	n.Fund(t, holder, big.NewInt(params.Ether))
	token := testcontracts.Deploy(t, client, deployer, testcontracts.TestToken, "Test", "TST", big.NewInt(1_000_000))
	testcontracts.Transact(t, client, deployer, testcontracts.TestToken, token, "transfer", holder, big.NewInt(10_000))

	w := startChainWalletAPI(t, signer, n.URL, func(c *node.Config) {
		c.Wallet.Policies = policy.Decls{{Wallet: "w", Spec: policy.Spec{
			Contracts: []policy.ContractSpec{{Address: token.Hex(), Functions: []string{"transfer(address,uint256)"}}},
		}}}
	})
	bob := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	allowed := w.send(`{"to":"` + token.Hex() + `","function":"transfer(address,uint256)","args":["` + bob.Hex() + `","1000"]}`)
	got := w.ended(allowed.ID)
	require.Equal(t, "done", got.Status, got.Error)
	require.Equal(t, big.NewInt(1000), testcontracts.BalanceOf(t, client, token, bob))

	ctx := context.Background()
	// The fee the chain charged is kept for the fee caps, as the receipt says.
	var gasUsed int64
	var price, hash string
	require.NoError(t, w.st.Conns().QueryRow(ctx, `SELECT gas_used, effective_gas_price_wei::text, tx_hash FROM ledgerq.tx_attempts
		WHERE task_id = $1 AND state = 'confirmed'`, allowed.ID).Scan(&gasUsed, &price, &hash))
	receipt, err := client.TransactionReceipt(ctx, common.HexToHash(hash))
	require.NoError(t, err)
	require.EqualValues(t, receipt.GasUsed, gasUsed)
	require.Equal(t, receipt.EffectiveGasPrice.String(), price)

	nonce, err := client.NonceAt(ctx, holder, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, nonce, "the allowed transfer took nonce 0")
	for body, rule := range map[string]string{
		`{"to":"` + token.Hex() + `","function":"approve(address,uint256)","args":["` + bob.Hex() + `","5"]}`: "selector",
		`{"to":"` + bob.Hex() + `","value":"1","data":"0x"}`:                                                  "recipient",
	} {
		code, out := w.do(http.MethodPost, "/v1/wallets/w/send-tx?task=true", body)
		require.Equal(t, http.StatusForbidden, code, out)
		var refusal struct{ Rule string }
		require.NoError(t, json.Unmarshal([]byte(out), &refusal))
		require.Equal(t, rule, refusal.Rule, out)
	}
	var tasks int
	require.NoError(t, w.st.Conns().QueryRow(ctx, `SELECT count(*) FROM ledgerq.wallet_tasks`).Scan(&tasks))
	require.Equal(t, 1, tasks, "a refused task is not stored")
	// The shard of the wallet runs after a refusal as after anything else:
	// let it run once more, then read the chain.
	w.ended(w.send(`{"to":"` + token.Hex() + `","function":"transfer(address,uint256)","args":["` + bob.Hex() + `","1"]}`).ID)
	nonce, err = client.NonceAt(ctx, holder, nil)
	require.NoError(t, err)
	pending, err := client.PendingNonceAt(ctx, holder)
	require.NoError(t, err)
	require.EqualValues(t, 2, nonce, "only the two allowed transfers were sent")
	require.EqualValues(t, 2, pending, "nothing else waits in the node's pool")
	allowance := testcontracts.Call(t, client, testcontracts.TestToken, token, "allowance", holder, bob)[0].(*big.Int)
	require.Zero(t, allowance.Sign(), "no approve was mined")
}
