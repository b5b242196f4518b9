package keystore_test

import (
	"context"
	"encoding/asn1"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
)

// A device answers (r, s) with either s and no recovery id, DER-encoded:
// the transaction's signature is made low-s, its recovery id found, and it
// recovers to the key's address, for every transaction type and chain.
func TestSignDigestTx_MakesALowSRecoverableSignatureFromABareOne(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	want := crypto.PubkeyToAddress(key.PublicKey)
	n := crypto.S256().Params().N
	device := func(high bool) keystore.DigestSign {
		return func(_ context.Context, digest []byte) (*big.Int, *big.Int, error) {
			sig, err := crypto.Sign(digest, key) // low s
			if err != nil {
				return nil, nil, err
			}
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
			if high {
				s = new(big.Int).Sub(n, s)
			}
			der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
			if err != nil {
				return nil, nil, err
			}
			return keystore.ParseDERSignature(der)
		}
	}
	to := common.Address{0xaa}
	for _, chainID := range []int64{1, 1337, 31337} {
		id := big.NewInt(chainID)
		for _, data := range []types.TxData{
			&types.LegacyTx{Nonce: 1, GasPrice: big.NewInt(2), Gas: 21000, To: &to, Value: big.NewInt(1)},
			&types.AccessListTx{ChainID: id, Nonce: 2, GasPrice: big.NewInt(2), Gas: 21000, To: &to},
			&types.DynamicFeeTx{ChainID: id, Nonce: 3, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &to},
		} {
			for _, high := range []bool{false, true} {
				signed, err := keystore.SignDigestTx(t.Context(), types.NewTx(data), id, want, device(high))
				require.NoError(t, err)
				from, err := types.Sender(types.LatestSignerForChainID(id), signed)
				require.NoError(t, err)
				require.Equal(t, want, from, "chain %d type %d high s %v", chainID, signed.Type(), high)
				_, _, s := signed.RawSignatureValues()
				require.LessOrEqual(t, s.Cmp(new(big.Int).Rsh(n, 1)), 0, "low s")
			}
		}
	}

	// A device that signs with another key never yields a transaction.
	other, err := crypto.GenerateKey()
	require.NoError(t, err)
	_, err = keystore.SignDigestTx(t.Context(), types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), Gas: 21000, To: &to}), big.NewInt(1),
		crypto.PubkeyToAddress(other.PublicKey), device(false))
	require.ErrorContains(t, err, "does not recover to "+crypto.PubkeyToAddress(other.PublicKey).Hex())
	_, _, err = keystore.ParseDERSignature([]byte{0x30, 0x01})
	require.Error(t, err)
}
