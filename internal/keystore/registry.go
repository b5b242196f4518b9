// Package keystore holds the keys of the wallets ledgerq signs for: go-ethereum
// keystore files unlocked at start, and a Registry of the wallets by name and
// by address, each with its chain and a Signer whose private key never
// leaves the process (never stored in the database, never logged).
package keystore

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Signer signs transactions from one address. A backend that signs
// elsewhere (an HSM, a KMS, a remote signer) honours ctx's deadline and
// answers a failure to reach it, or its throttling, as an
// *UnavailableError, which says nothing about the transaction.
type Signer interface {
	// Address is the account the signer signs for.
	Address() ledger.Address
	// SignTx returns tx signed for chainID (EIP-155 / London signer).
	SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error)
}

// BackendOf names the backend a signer signs with, for metrics and the
// wallet's status: its Backend() when it has one, else "keystore".
func BackendOf(s Signer) string {
	if b, ok := s.(interface{ Backend() string }); ok {
		return b.Backend()
	}
	return "keystore"
}

// UnavailableError says a signer could not be reached, or throttled the
// request: the transaction was not signed (as far as ledgerq can know), and
// signing it again later may succeed. RetryAfter is the backend's hint, 0
// for none.
type UnavailableError struct {
	Backend    string
	Err        error
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return "the " + e.Backend + " signer is unavailable: " + e.Err.Error()
}

// Unwrap returns the backend's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Wallet is one configured sending account.
type Wallet struct {
	// ID is the wallet's name in the API (/v1/wallets/{wallet}/…) and in
	// wallet_tasks.wallet_id.
	ID string
	// ChainID is the chain the wallet sends on.
	ChainID int64
	// Signer signs for the wallet's address.
	Signer Signer
	// Chain is the chain's name in the configuration; empty when the
	// wallet was built without one (tests, the shorthand's single chain).
	Chain string
	// Declared says the wallet was added at run time (ledgerq.wallets)
	// rather than by the configuration.
	Declared bool
	// Disabled says the wallet takes no new task; its tasks still run to
	// their end.
	Disabled bool
}

// Address is the wallet's account.
func (w Wallet) Address() ledger.Address { return w.Signer.Address() }

// idPattern is what a wallet name may be: it appears in URL paths and
// shard keys.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidID reports whether id can name a wallet.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Registry is the set of wallets, by name and by (chain, address): the
// configuration's, built at start, and those added at run time, which Put
// and Remove change while the lanes read it. Safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	byID     map[string]Wallet
	bySender map[senderKey]Wallet
}

type senderKey struct {
	chainID int64
	addr    ledger.Address
}

// NewRegistry checks ws (valid, distinct names; one wallet per chain and
// address, since one shard sends for an address) and indexes them.
func NewRegistry(ws ...Wallet) (*Registry, error) {
	r := &Registry{byID: map[string]Wallet{}, bySender: map[senderKey]Wallet{}}
	for _, w := range ws {
		if _, dup := r.byID[w.ID]; dup {
			return nil, fmt.Errorf("wallet %q is configured twice", w.ID)
		}
		if err := r.Put(w); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Put adds w, or replaces the wallet of its name (a change of its signer
// or of Disabled). It refuses an invalid wallet, and one whose chain and
// address another wallet sends from: one shard sends for an address.
func (r *Registry) Put(w Wallet) error {
	switch {
	case !ValidID(w.ID):
		return fmt.Errorf("wallet %q: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", w.ID)
	case w.ChainID <= 0:
		return fmt.Errorf("wallet %q: chain id %d is not positive", w.ID, w.ChainID)
	case w.Signer == nil:
		return fmt.Errorf("wallet %q: no signer", w.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := senderKey{w.ChainID, w.Address()}
	if other, dup := r.bySender[k]; dup && other.ID != w.ID {
		return fmt.Errorf("wallets %q and %q both send from %s on chain %d", other.ID, w.ID, w.Address().Hex(), w.ChainID)
	}
	if old, ok := r.byID[w.ID]; ok {
		delete(r.bySender, senderKey{old.ChainID, old.Address()})
	}
	r.byID[w.ID] = w
	r.bySender[k] = w
	return nil
}

// Remove takes the wallet named id out, and returns it.
func (r *Registry) Remove(id string) (Wallet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.byID[id]
	if ok {
		delete(r.byID, id)
		delete(r.bySender, senderKey{w.ChainID, w.Address()})
	}
	return w, ok
}

// ByID returns the wallet named id.
func (r *Registry) ByID(id string) (Wallet, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	w, ok := r.byID[id]
	return w, ok
}

// BySender returns the wallet that sends from addr on chainID.
func (r *Registry) BySender(chainID int64, addr ledger.Address) (Wallet, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	w, ok := r.bySender[senderKey{chainID, addr}]
	return w, ok
}

// All returns every wallet, by name.
func (r *Registry) All() []Wallet {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ws := make([]Wallet, 0, len(r.byID))
	for _, w := range r.byID {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].ID < ws[j].ID })
	return ws
}

// KeySigner signs with an in-memory private key (a keystore file's, once
// unlocked, or a test's).
type KeySigner struct {
	key  *ecdsa.PrivateKey
	addr ledger.Address
}

// NewKeySigner returns a Signer for key.
func NewKeySigner(key *ecdsa.PrivateKey) (*KeySigner, error) {
	if key == nil {
		return nil, errors.New("wallet: nil private key")
	}
	return &KeySigner{key: key, addr: ledger.Address(crypto.PubkeyToAddress(key.PublicKey))}, nil
}

// Address implements Signer.
func (s *KeySigner) Address() ledger.Address { return s.addr }

// SignTx implements Signer; the key is in memory, so ctx is not needed.
func (s *KeySigner) SignTx(_ context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	return types.SignTx(tx, types.LatestSignerForChainID(chainID), s.key)
}

// String never shows the key.
func (s *KeySigner) String() string { return "KeySigner(" + s.addr.Hex() + ")" }
