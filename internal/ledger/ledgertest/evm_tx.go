package ledgertest

import (
	"crypto/ecdsa"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
)

// SignTx signs tx with key for tx's chain id.
func SignTx(t testing.TB, key *ecdsa.PrivateKey, tx *types.DynamicFeeTx) *types.Transaction {
	t.Helper()
	signed, err := types.SignNewTx(key, types.LatestSignerForChainID(tx.ChainID), tx)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// RawTx is tx's binary encoding, as eth_sendRawTransaction takes it.
func RawTx(t testing.TB, tx *types.Transaction) []byte {
	t.Helper()
	b, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
