package faultproxy_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// TestProxy_OnGethALostSendIsMinedAndALaggingNodeHidesIt runs the proxy in
// front of a real geth --dev: a send whose answer is lost is mined all the
// same, and a lagging batch, asked right after, tells an older head, nonce
// and no receipt, every element at the same head.
func TestProxy_OnGethALostSendIsMinedAndALaggingNodeHidesIt(t *testing.T) {
	t.Parallel()
	g := testgeth.Start(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	g.Fund(t, from, big.NewInt(params.Ether))
	g.WaitHead(t, 5) // so that a head three blocks below the send's is not the genesis

	p, err := faultproxy.New(g.URL, faultproxy.Config{LoseSendAnswer: 1})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	url, err := p.Start()
	require.NoError(t, err)
	rc, err := rpc.Dial(url)
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	ec := ethclient.NewClient(rc)

	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(g.ChainID), &types.DynamicFeeTx{
		ChainID: g.ChainID, Nonce: 0, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei),
		Gas: params.TxGas, To: &recipient, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	requireReset(t, ec.SendTransaction(ctx(t), tx))
	mined := g.WaitMined(t, tx.Hash()).BlockNumber.Uint64()

	// head−k three blocks below the transaction's block, so below it for
	// the next seconds (a block a second) whatever the head when the proxy
	// reads it, and above the genesis.
	head := g.WaitHead(t, mined+5)
	require.NoError(t, p.Set(faultproxy.Config{Lag: 1, LagBlocks: head - mined + 3}))
	var lagged, nonce, pending hexutil.Uint64
	var receipt, byHash, block map[string]any
	batch := []rpc.BatchElem{
		{Method: "eth_blockNumber", Result: &lagged},
		{Method: "eth_getTransactionCount", Args: []any{from, "latest"}, Result: &nonce},
		{Method: "eth_getTransactionCount", Args: []any{from, "pending"}, Result: &pending},
		{Method: "eth_getTransactionReceipt", Args: []any{tx.Hash()}, Result: &receipt},
		{Method: "eth_getTransactionByHash", Args: []any{tx.Hash()}, Result: &byHash},
		{Method: "eth_getBlockByNumber", Args: []any{"latest", false}, Result: &block},
	}
	require.NoError(t, rc.BatchCallContext(ctx(t), batch))
	for _, e := range batch {
		require.NoError(t, e.Error, e.Method)
	}
	require.Less(t, uint64(lagged), mined)
	require.Positive(t, uint64(lagged))
	require.Zero(t, nonce)
	require.Zero(t, pending)
	require.Nil(t, receipt)
	require.Nil(t, byHash)
	require.Equal(t, hexutil.EncodeUint64(uint64(lagged)), block["number"])
	_, err = ec.TransactionReceipt(ctx(t), tx.Hash())
	require.ErrorIs(t, err, ethereum.NotFound)

	require.NoError(t, p.Set(faultproxy.Config{}))
	r, err := ec.TransactionReceipt(ctx(t), tx.Hash())
	require.NoError(t, err)
	require.Equal(t, mined, r.BlockNumber.Uint64())
	t.Logf("lost send mined in block %d; lagging answers at head %d; counts %v", mined, lagged, p.Counts())
}
