package keystore

import (
	"context"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Signing with a key that stays elsewhere. An HSM (PKCS#11's CKM_ECDSA), a
// cloud KMS (AWS KMS's ECDSA_SHA_256 on a digest) or any device that signs a
// 32-byte digest with secp256k1 answers a bare (r, s), often DER-encoded,
// with no recovery id and either s. Ethereum needs s in the lower half of
// the group order (EIP-2) and the recovery id; SignDigestTx makes the
// transaction's signature from such an answer, and checks that it recovers
// to the address the signer signs for.

// DigestSign signs a 32-byte digest with a secp256k1 key held elsewhere and
// returns r and s (any s: SignDigestTx normalises it).
type DigestSign func(ctx context.Context, digest []byte) (r, s *big.Int, err error)

var (
	secp256k1N     = crypto.S256().Params().N
	secp256k1HalfN = new(big.Int).Rsh(secp256k1N, 1)
)

// SignDigestTx signs tx for chainID (the latest signer for the chain) with
// sign, from want: it asks for the signature of the transaction's signing
// hash, makes s low (s > N/2 becomes N − s), finds the recovery id by
// recovering the address with each, and returns the signed transaction. A
// signature that recovers to no id's address, or to another address, is an
// error naming want: a backend signing with a key other than the
// configured one must never send.
func SignDigestTx(ctx context.Context, tx *types.Transaction, chainID *big.Int, want common.Address, sign DigestSign) (*types.Transaction, error) {
	signer := types.LatestSignerForChainID(chainID)
	digest := signer.Hash(tx)
	r, s, err := sign(ctx, digest[:])
	if err != nil {
		return nil, err
	}
	sig, err := RecoverableSignature(digest[:], r, s, want)
	if err != nil {
		return nil, err
	}
	return tx.WithSignature(signer, sig)
}

// RecoverableSignature returns the 65-byte [R || S || V] signature of
// digest by want (V the recovery id, 0 or 1) from r and s, s made low.
func RecoverableSignature(digest []byte, r, s *big.Int, want common.Address) ([]byte, error) {
	if r == nil || s == nil || r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(secp256k1N) >= 0 || s.Cmp(secp256k1N) >= 0 {
		return nil, errors.New("the signer answered a signature out of range")
	}
	if s.Cmp(secp256k1HalfN) > 0 {
		s = new(big.Int).Sub(secp256k1N, s)
	}
	sig := make([]byte, crypto.SignatureLength)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:64])
	for v := byte(0); v < 2; v++ {
		sig[64] = v
		pub, err := crypto.SigToPub(digest, sig)
		if err == nil && crypto.PubkeyToAddress(*pub) == want {
			return sig, nil
		}
	}
	return nil, fmt.Errorf("the signer's signature does not recover to %s: it signs with another key", want.Hex())
}

// ParseDERSignature reads an ASN.1 DER ECDSA signature (SEQUENCE of the
// INTEGERs r and s), as PKCS#11 modules that encode theirs and AWS KMS
// answer; trailing bytes are an error.
func ParseDERSignature(der []byte) (r, s *big.Int, err error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil {
		return nil, nil, fmt.Errorf("the signer's DER signature: %w", err)
	}
	if len(rest) > 0 {
		return nil, nil, errors.New("the signer's DER signature has trailing bytes")
	}
	return sig.R, sig.S, nil
}
