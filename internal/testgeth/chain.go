package testgeth

import (
	"context"
	"fmt"
	"math/big"
	"sort"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
)

// MinedTx is one transaction as the chain holds it.
type MinedTx struct {
	Block  uint64
	Nonce  uint64
	Hash   common.Hash
	To     *common.Address // nil for a contract creation
	Value  *big.Int
	Data   []byte
	Status uint64 // types.ReceiptStatusSuccessful or types.ReceiptStatusFailed
}

// MinedFrom lists every transaction sent by from that the chain at url has
// mined, from the genesis block to the head at the time of the call, in
// chain order. It reads the chain as any client would — block by block with
// ethclient, the sender recovered from each signature, a receipt for each
// match — so an end-to-end test can check what really landed.
func MinedFrom(ctx context.Context, url string, from common.Address) ([]MinedTx, error) {
	ec, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("testgeth: dialing %s: %w", url, err)
	}
	defer ec.Close()
	chainID, err := ec.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("testgeth: eth_chainId: %w", err)
	}
	head, err := ec.BlockNumber(ctx)
	if err != nil {
		return nil, fmt.Errorf("testgeth: eth_blockNumber: %w", err)
	}
	signer := types.LatestSignerForChainID(chainID)
	var out []MinedTx
	for num := uint64(0); num <= head; num++ {
		block, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(num))
		if err != nil {
			return nil, fmt.Errorf("testgeth: block %d: %w", num, err)
		}
		for _, tx := range block.Transactions() {
			sender, err := types.Sender(signer, tx)
			if err != nil {
				return nil, fmt.Errorf("testgeth: sender of %s in block %d: %w", tx.Hash().Hex(), num, err)
			}
			if sender != from {
				continue
			}
			r, err := ec.TransactionReceipt(ctx, tx.Hash())
			if err != nil {
				return nil, fmt.Errorf("testgeth: receipt of %s in block %d: %w", tx.Hash().Hex(), num, err)
			}
			out = append(out, MinedTx{Block: num, Nonce: tx.Nonce(), Hash: tx.Hash(), To: tx.To(), Value: tx.Value(), Data: tx.Data(), Status: r.Status})
		}
	}
	return out, nil
}

// CheckNonces returns an error unless txs holds exactly one transaction per
// nonce and the nonces are contiguous from the smallest. The chain itself
// forbids anything else for one sender, so a failure here means the list is
// not a whole read of the chain (a block missed, two senders mixed).
func CheckNonces(txs []MinedTx) error {
	sorted := append([]MinedTx(nil), txs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Nonce < sorted[j].Nonce })
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1], sorted[i]
		switch {
		case cur.Nonce == prev.Nonce:
			return fmt.Errorf("nonce %d mined twice: %s and %s", cur.Nonce, prev.Hash.Hex(), cur.Hash.Hex())
		case cur.Nonce != prev.Nonce+1:
			return fmt.Errorf("nonces %d to %d missing (between %s and %s)", prev.Nonce+1, cur.Nonce-1, prev.Hash.Hex(), cur.Hash.Hex())
		}
	}
	return nil
}

// ByHash indexes txs by hash and returns an error if a hash appears twice,
// so a test can look up each task's transaction hash: present means mined,
// and the map's size against the task count tells whether anything else was
// sent.
func ByHash(txs []MinedTx) (map[common.Hash]MinedTx, error) {
	m := make(map[common.Hash]MinedTx, len(txs))
	for _, tx := range txs {
		if prev, dup := m[tx.Hash]; dup {
			return nil, fmt.Errorf("transaction %s listed twice (blocks %d and %d)", tx.Hash.Hex(), prev.Block, tx.Block)
		}
		m[tx.Hash] = tx
	}
	return m, nil
}
