package testgeth_test

import (
	"context"
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// localTxResubmitBlocks is how many blocks (seconds) a test waits after a
// restart before it trusts that geth will not mine a lost transaction by
// itself: without --txpool.nolocals geth journals the transactions sent to
// it and sends them again 10 s after it starts.
const localTxResubmitBlocks = 12

// TestCrash_KillLosesTheBlocksSinceTheCheckpoint: what the wallet lane's
// crash test relies on. Nonces 0–2 are mined before a checkpoint, 3–5
// after; geth is SIGKILLed and restarted. It comes back at the checkpoint:
// 3–5 are gone (no receipt, the account's nonce back to 3) and stay gone,
// and the same raw transactions sent again are mined with the same hashes.
func TestCrash_KillLosesTheBlocksSinceTheCheckpoint(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t, testgeth.Crashable())
	ctx := context.Background()
	a := newAccount(t)
	n.Fund(t, a.addr, oneEther)
	to := common.Address{0xc4}
	tip := big.NewInt(params.GWei)
	var kept, lost []*types.Transaction
	for nonce := uint64(0); nonce < 3; nonce++ {
		kept = append(kept, send(t, n, a, nonce, &to, big.NewInt(1), params.TxGas, tip, nil))
	}
	keptReceipts := map[common.Hash]*types.Receipt{}
	for _, tx := range kept {
		keptReceipts[tx.Hash()] = n.WaitMined(t, tx.Hash())
	}
	saved := n.Checkpoint(t)
	if last := keptReceipts[kept[2].Hash()].BlockNumber.Uint64(); saved < last {
		t.Fatalf("Checkpoint saved head %d; want at least block %d, which holds nonce 2", saved, last)
	}
	for nonce := uint64(3); nonce < 6; nonce++ {
		lost = append(lost, send(t, n, a, nonce, &to, big.NewInt(1), params.TxGas, tip, nil))
	}
	firstLost := uint64(0)
	for _, tx := range lost {
		b := n.WaitMined(t, tx.Hash()).BlockNumber.Uint64()
		if firstLost == 0 || b < firstLost {
			firstLost = b
		}
	}
	if got := n.Nonce(t, a.addr); got != 6 {
		t.Fatalf("nonce before the kill = %d; want 6", got)
	}

	n.Kill()
	head := n.Restart(t)

	if head != saved || head >= firstLost {
		t.Fatalf("Restart came back at head %d; want the checkpoint's head %d, below block %d, the first that held a lost transaction", head, saved, firstLost)
	}
	if got := n.Nonce(t, a.addr); got != 3 {
		t.Fatalf("nonce after the restart = %d; want 3 (nonces 3–5 lost)", got)
	}
	for _, tx := range kept {
		r, err := n.Client().TransactionReceipt(ctx, tx.Hash())
		if err != nil || r.BlockHash != keptReceipts[tx.Hash()].BlockHash {
			t.Errorf("receipt of nonce %d after the restart: %v, %v; want it in block %s as before", tx.Nonce(), r, err, keptReceipts[tx.Hash()].BlockHash.Hex())
		}
	}
	// The lost transactions stay lost: no receipt, not in the pool, even
	// after the time geth would take to send journalled ones again.
	n.WaitHead(t, head+localTxResubmitBlocks)
	for _, tx := range lost {
		if _, err := n.Client().TransactionReceipt(ctx, tx.Hash()); !errors.Is(err, ethereum.NotFound) {
			t.Errorf("receipt of lost nonce %d (%s) %d blocks after the restart: %v; want not found", tx.Nonce(), tx.Hash().Hex(), localTxResubmitBlocks, err)
		}
	}
	if got, err := n.Client().PendingNonceAt(ctx, a.addr); err != nil || got != 3 {
		t.Errorf("pending nonce after the restart = %d, %v; want 3 (the pool lost them too)", got, err)
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, tx := range lost {
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var hash common.Hash
		if err := n.RPC().CallContext(ctx, &hash, "eth_sendRawTransaction", hexutil.Bytes(raw)); err != nil || hash != tx.Hash() {
			t.Fatalf("sending nonce %d's raw bytes again: %s, %v; want %s", tx.Nonce(), hash.Hex(), err, tx.Hash().Hex())
		}
	}
	for _, tx := range lost {
		if r := n.WaitMined(t, tx.Hash()); r.Status != types.ReceiptStatusSuccessful || r.BlockNumber.Uint64() <= head {
			t.Errorf("resent nonce %d: status %d in block %v; want success after head %d", tx.Nonce(), r.Status, r.BlockNumber, head)
		}
	}
	mined, err := testgeth.MinedFrom(ctx, n.URL, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := testgeth.CheckNonces(mined); err != nil || len(mined) != 6 {
		t.Fatalf("mined from %s: %d transactions, CheckNonces %v; want nonces 0–5 once each", a.addr.Hex(), len(mined), err)
	}
	byHash, err := testgeth.ByHash(mined)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range append(kept, lost...) {
		if _, ok := byHash[tx.Hash()]; !ok {
			t.Errorf("nonce %d's transaction %s is not on the chain", tx.Nonce(), tx.Hash().Hex())
		}
	}
}

// TestCrash_RestartKeepsTheDevAccountChainAndURL: a client dialed before the
// kill (the wallet lane's) talks to the restarted node at the same URL, on
// the same chain, with the same funded and unlocked dev account; a second
// crash comes back at the same checkpoint.
func TestCrash_RestartKeepsTheDevAccountChainAndURL(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t, testgeth.Crashable())
	ctx := context.Background()
	url, dev, pid := n.URL, n.Dev, n.Pid()
	outside, err := ethclient.Dial(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	if _, err := outside.ChainID(ctx); err != nil {
		t.Fatal(err)
	}

	n.Kill()
	if alive(pid) {
		t.Fatalf("geth pid %d still running after Kill", pid)
	}
	if _, err := outside.ChainID(ctx); err == nil {
		t.Fatal("the killed node answered eth_chainId")
	}
	head := n.Restart(t)

	if n.URL != url || n.Dev != dev || n.Pid() == pid {
		t.Fatalf("after Restart: URL %s, dev %s, pid %d; want URL %s, dev %s, a new pid (was %d)", n.URL, n.Dev.Hex(), n.Pid(), url, dev.Hex(), pid)
	}
	id, err := outside.ChainID(ctx)
	if err != nil || id.Int64() != testgeth.DevChainID {
		t.Fatalf("eth_chainId at %s after the restart = %v, %v; want %d", url, id, err, testgeth.DevChainID)
	}
	var accounts []common.Address
	if err := outside.Client().CallContext(ctx, &accounts, "eth_accounts"); err != nil || len(accounts) == 0 || accounts[0] != dev {
		t.Fatalf("eth_accounts after the restart = %v, %v; want [%s]", accounts, err, dev.Hex())
	}
	// Still funded and unlocked: Fund signs with it in the node.
	b := newAccount(t)
	r := n.Fund(t, b.addr, oneEther)
	if r.BlockNumber.Uint64() <= head {
		t.Fatalf("funding after the restart mined in block %d; want after head %d", r.BlockNumber, head)
	}

	n.Kill()
	if again := n.Restart(t); again != head {
		t.Fatalf("second Kill and Restart came back at head %d; want the checkpoint's %d again", again, head)
	}
	if bal, err := outside.BalanceAt(ctx, b.addr, nil); err != nil || bal.Sign() != 0 {
		t.Fatalf("balance of %s, funded after the checkpoint, after a second crash = %v, %v; want 0", b.addr.Hex(), bal, err)
	}
}
