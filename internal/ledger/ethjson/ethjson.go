// Package ethjson writes Ethereum JSON-RPC objects as geth writes them. Its
// model, go-ethereum's internal/ethapi, cannot be imported; the simulated
// JAM chain's EVM JSON-RPC and the builder lane's POST /rpc both answer with
// these, so a transaction reads the same before and after it executes.
package ethjson

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Transaction is a transaction as geth's eth_getTransactionByHash writes it
// (ethapi.RPCTransaction). The block fields are null for a transaction not
// yet in a block, and its blockTimestamp is left out.
type Transaction struct {
	BlockHash         *common.Hash                 `json:"blockHash"`
	BlockNumber       *hexutil.Big                 `json:"blockNumber"`
	BlockTimestamp    *hexutil.Uint64              `json:"blockTimestamp,omitempty"`
	From              common.Address               `json:"from"`
	Gas               hexutil.Uint64               `json:"gas"`
	GasPrice          *hexutil.Big                 `json:"gasPrice"`
	GasFeeCap         *hexutil.Big                 `json:"maxFeePerGas,omitempty"`
	GasTipCap         *hexutil.Big                 `json:"maxPriorityFeePerGas,omitempty"`
	Hash              common.Hash                  `json:"hash"`
	Input             hexutil.Bytes                `json:"input"`
	Nonce             hexutil.Uint64               `json:"nonce"`
	To                *common.Address              `json:"to"`
	TransactionIndex  *hexutil.Uint64              `json:"transactionIndex"`
	Value             *hexutil.Big                 `json:"value"`
	Type              hexutil.Uint64               `json:"type"`
	Accesses          *types.AccessList            `json:"accessList,omitempty"`
	ChainID           *hexutil.Big                 `json:"chainId,omitempty"`
	AuthorizationList []types.SetCodeAuthorization `json:"authorizationList,omitempty"`
	V                 *hexutil.Big                 `json:"v"`
	R                 *hexutil.Big                 `json:"r"`
	S                 *hexutil.Big                 `json:"s"`
	YParity           *hexutil.Uint64              `json:"yParity,omitempty"`
}

// NewPendingTransaction is tx, signed by from, not yet in a block: a fee cap
// transaction's gas price is its fee cap, as geth reports it.
func NewPendingTransaction(tx *types.Transaction, from common.Address) *Transaction {
	return newTransaction(tx, from, nil, 0)
}

// NewTransaction is the transaction at index i of block b, signed by from:
// executed, so a fee cap transaction's gas price is the price it paid,
// min(tip + base fee, fee cap).
func NewTransaction(b *types.Block, i int, from common.Address) *Transaction {
	return newTransaction(b.Transactions()[i], from, b, i)
}

func newTransaction(tx *types.Transaction, from common.Address, b *types.Block, i int) *Transaction {
	v, r, s := tx.RawSignatureValues()
	out := &Transaction{
		From: from, Gas: hexutil.Uint64(tx.Gas()), GasPrice: (*hexutil.Big)(tx.GasPrice()), Hash: tx.Hash(),
		Input: tx.Data(), Nonce: hexutil.Uint64(tx.Nonce()), To: tx.To(), Value: (*hexutil.Big)(tx.Value()),
		Type: hexutil.Uint64(tx.Type()), V: (*hexutil.Big)(v), R: (*hexutil.Big)(r), S: (*hexutil.Big)(s),
	}
	if b != nil {
		hash, at, index := b.Hash(), hexutil.Uint64(b.Time()), hexutil.Uint64(i)
		out.BlockHash, out.BlockNumber, out.BlockTimestamp, out.TransactionIndex = &hash, (*hexutil.Big)(b.Number()), &at, &index
	}
	if tx.Type() == types.LegacyTxType {
		// An EIP-155 chain id is shown; a pre-EIP-155 transaction has none.
		if id := tx.ChainId(); id.Sign() != 0 {
			out.ChainID = (*hexutil.Big)(id)
		}
		return out
	}
	al := tx.AccessList()
	yParity := hexutil.Uint64(v.Sign())
	out.Accesses, out.ChainID, out.YParity = &al, (*hexutil.Big)(tx.ChainId()), &yParity
	if tx.Type() != types.AccessListTxType {
		out.GasFeeCap, out.GasTipCap = (*hexutil.Big)(tx.GasFeeCap()), (*hexutil.Big)(tx.GasTipCap())
		out.GasPrice = (*hexutil.Big)(tx.GasFeeCap())
		if b != nil {
			price := new(big.Int).Add(tx.GasTipCap(), b.BaseFee())
			if tx.GasFeeCapIntCmp(price) > 0 {
				out.GasPrice = (*hexutil.Big)(price)
			}
		}
	}
	if tx.Type() == types.SetCodeTxType {
		out.AuthorizationList = tx.SetCodeAuthorizations()
	}
	return out
}
