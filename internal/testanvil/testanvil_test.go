package testanvil_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/testanvil"
)

// transfer signs a 1-wei transfer from key with nonce, fees well above
// anvil's base fee.
func transfer(t *testing.T, n *testanvil.Node, key *ecdsa.PrivateKey, nonce uint64) *types.Transaction {
	t.Helper()
	to := common.Address{0xc4}
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(n.ChainID), &types.DynamicFeeTx{
		ChainID: n.ChainID, Nonce: nonce, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func send(t *testing.T, n *testanvil.Node, tx *types.Transaction) {
	t.Helper()
	if err := n.Client().SendTransaction(context.Background(), tx); err != nil {
		t.Fatalf("sending nonce %d: %v", tx.Nonce(), err)
	}
}

// TestStart_ChainIDAccountsAndSetBalance: the node answers with the chain id
// it was given, its developer keys sign for funded accounts, and
// SetBalance funds a new account without a transaction.
func TestStart_ChainIDAccountsAndSetBalance(t *testing.T) {
	t.Parallel()
	n := testanvil.Start(t, testanvil.ChainID(31338), testanvil.Automine())
	ctx := context.Background()
	id, err := n.Client().ChainID(ctx)
	if err != nil || id.Uint64() != 31338 {
		t.Fatalf("ChainID = %v, %v; want 31338", id, err)
	}
	if len(n.Keys) != 10 || crypto.PubkeyToAddress(n.Keys[0].PublicKey) != n.Accounts[0] {
		t.Fatalf("%d keys for %d accounts; want 10, the first of account 0", len(n.Keys), len(n.Accounts))
	}
	tx := transfer(t, n, n.Keys[0], 0)
	send(t, n, tx)
	if r := n.WaitMined(t, tx.Hash()); r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("a developer account's transfer failed: %+v", r)
	}
	addr := common.Address{0xfe, 0xed}
	n.SetBalance(t, addr, big.NewInt(12345))
	if bal, err := n.Client().BalanceAt(ctx, addr, nil); err != nil || bal.Int64() != 12345 {
		t.Fatalf("balance after SetBalance = %v, %v; want 12345", bal, err)
	}
}

// TestReorg_TakesTheLastBlocksTransactionsOffTheChain: what the wallet
// lane's reorg tests rely on. A transaction mined in the head block is gone
// after Reorg(1) (no receipt, the sender's nonce back), the head keeps its
// number under another hash, and a transaction handed to Reorg is in the new
// blocks.
func TestReorg_TakesTheLastBlocksTransactionsOffTheChain(t *testing.T) {
	t.Parallel()
	n := testanvil.Start(t, testanvil.Automine())
	ctx := context.Background()
	key := n.Keys[1]
	from := n.Accounts[1]
	tx := transfer(t, n, key, 0)
	send(t, n, tx)
	r := n.WaitMined(t, tx.Hash())
	head := n.Head(t)
	if r.BlockNumber.Uint64() != head {
		t.Fatalf("mined in block %d, head %d: automine makes a block per transaction", r.BlockNumber, head)
	}

	n.Reorg(t, 1)

	if got := n.Head(t); got != head {
		t.Fatalf("head after Reorg(1) = %d; want %d", got, head)
	}
	b, err := n.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(head))
	if err != nil || b.Hash() == r.BlockHash {
		t.Fatalf("block %d after the reorg = %v, %v; want another hash than %s", head, b, err, r.BlockHash.Hex())
	}
	if _, err := n.Client().TransactionReceipt(ctx, tx.Hash()); !errors.Is(err, ethereum.NotFound) {
		t.Fatalf("receipt of the reorganised transaction: %v; want not found", err)
	}
	if got := n.Nonce(t, from); got != 0 {
		t.Fatalf("nonce after the reorg = %d; want 0", got)
	}

	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	n.Reorg(t, 1, testanvil.ReorgTx{Raw: raw, Block: 0})
	if r := n.WaitMined(t, tx.Hash()); r.BlockNumber.Uint64() != head {
		t.Fatalf("the transaction given to Reorg is in block %d; want %d", r.BlockNumber, head)
	}
}

// TestDropAllTransactions_EmptiesThePool: a transaction waiting in the pool
// (no block is made until Mine) is gone after DropAllTransactions: Mine then
// makes an empty block and the nonce stays.
func TestDropAllTransactions_EmptiesThePool(t *testing.T) {
	t.Parallel()
	n := testanvil.Start(t, testanvil.BlockTime(time.Hour))
	ctx := context.Background()
	tx := transfer(t, n, n.Keys[2], 0)
	send(t, n, tx)
	if pending, err := n.Client().PendingNonceAt(ctx, n.Accounts[2]); err != nil || pending != 1 {
		t.Fatalf("pending nonce = %d, %v; want 1 (the transfer in the pool)", pending, err)
	}
	n.DropAllTransactions(t)
	head := n.Head(t)
	n.Mine(t)
	if got := n.Head(t); got != head+1 {
		t.Fatalf("head after Mine = %d; want %d", got, head+1)
	}
	if got := n.Nonce(t, n.Accounts[2]); got != 0 {
		t.Fatalf("nonce after the dropped transfer's block = %d; want 0", got)
	}
}

// TestRestart_KeepsTheChain: after a clean stop the node comes back on the
// same URL with every block; after a SIGKILL, with the blocks of its last
// state dump, the transactions mined before it included.
func TestRestart_KeepsTheChain(t *testing.T) {
	t.Parallel()
	n := testanvil.Start(t)
	ctx := context.Background()
	tx := transfer(t, n, n.Keys[3], 0)
	send(t, n, tx)
	r := n.WaitMined(t, tx.Hash())
	n.WaitHead(t, r.BlockNumber.Uint64()+2) // a state dump (every second) after it

	before := n.Head(t)
	n.Interrupt(t)
	if head := n.Restart(t); head < before {
		t.Fatalf("Restart after a clean stop came back at head %d; want at least %d", head, before)
	}
	if got, err := n.Client().TransactionReceipt(ctx, tx.Hash()); err != nil || got.BlockHash != r.BlockHash {
		t.Fatalf("receipt after the clean restart = %v, %v; want in block %s", got, err, r.BlockHash.Hex())
	}

	n.WaitHead(t, n.Head(t)+2)
	n.Kill()
	if _, err := n.Client().BlockNumber(ctx); err == nil {
		t.Fatal("a killed node answered")
	}
	head := n.Restart(t)
	if head <= r.BlockNumber.Uint64() {
		t.Fatalf("Restart after SIGKILL came back at head %d; want above block %d", head, r.BlockNumber)
	}
	if got := n.Nonce(t, n.Accounts[3]); got != 1 {
		t.Fatalf("nonce after the restart = %d; want 1", got)
	}
	n.WaitHead(t, head+1) // and it makes blocks again
}
