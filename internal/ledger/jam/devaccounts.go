package jam

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// DevMnemonic is the development mnemonic whose accounts hardhat and anvil
// fund. Its keys are public: the accounts are for local chains only.
const DevMnemonic = "test test test test test test test test test test test junk"

// DevAccountCount is how many accounts DevAccounts derives.
const DevAccountCount = 20

// DevAccount is one account of DevMnemonic.
type DevAccount struct {
	// Path is its BIP-32 path, m/44'/60'/0'/0/i.
	Path    string
	Address common.Address
	Key     *ecdsa.PrivateKey
}

// DevAccounts returns the first DevAccountCount accounts of DevMnemonic (BIP-39
// seed with an empty passphrase, BIP-32 path m/44'/60'/0'/0/i): account 0 is
// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266. The list is a copy; the keys
// are shared.
func DevAccounts() []DevAccount {
	return append([]DevAccount(nil), devAccounts()...)
}

// devAccounts derives the list once: the seed's 2048 PBKDF2 rounds are
// not worth repeating, and a program that never asks pays nothing.
var devAccounts = sync.OnceValue(func() []DevAccount {
	seed, err := pbkdf2.Key(sha512.New, DevMnemonic, []byte("mnemonic"), 2048, 64)
	if err != nil {
		panic(fmt.Sprintf("jam: BIP-39 seed: %v", err))
	}
	master := hmacSHA512([]byte("Bitcoin seed"), seed)
	key, chain := master[:32], master[32:]
	// m/44'/60'/0'/0, then one child per account.
	for _, i := range []uint32{hardened + 44, hardened + 60, hardened + 0, 0} {
		key, chain = bip32Child(key, chain, i)
	}
	out := make([]DevAccount, DevAccountCount)
	for i := range out {
		k, _ := bip32Child(key, chain, uint32(i))
		priv, err := crypto.ToECDSA(k)
		if err != nil {
			panic(fmt.Sprintf("jam: dev account %d: %v", i, err))
		}
		out[i] = DevAccount{Path: fmt.Sprintf("m/44'/60'/0'/0/%d", i), Address: crypto.PubkeyToAddress(priv.PublicKey), Key: priv}
	}
	return out
})

const hardened = 1 << 31

// bip32Child is BIP-32's private child derivation (CKDpriv). The one case
// BIP-32 skips, a child key at or above the curve order or zero, has
// probability below 2^-127 and does not occur on this path.
func bip32Child(key, chain []byte, i uint32) ([]byte, []byte) {
	var data []byte
	if i >= hardened {
		data = append([]byte{0}, key...)
	} else {
		priv, err := crypto.ToECDSA(key)
		if err != nil {
			panic(fmt.Sprintf("jam: BIP-32 parent key: %v", err))
		}
		data = crypto.CompressPubkey(&priv.PublicKey)
	}
	data = binary.BigEndian.AppendUint32(data, i)
	sum := hmacSHA512(chain, data)
	n := crypto.S256().Params().N
	child := new(big.Int).SetBytes(sum[:32])
	child.Add(child, new(big.Int).SetBytes(key))
	child.Mod(child, n)
	return common.LeftPadBytes(child.Bytes(), 32), sum[32:]
}

func hmacSHA512(key, data []byte) []byte {
	m := hmac.New(sha512.New, key)
	m.Write(data)
	return m.Sum(nil)
}
