package testfactory

import (
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/keystore"
)

// NewSigner returns a signer of a new random key.
func NewSigner(tb testing.TB) *keystore.KeySigner {
	tb.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	s, err := keystore.NewKeySigner(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
