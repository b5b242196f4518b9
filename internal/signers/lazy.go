package signers

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

// lazyRetryAfter is how long a wallet waits after its backend refused the
// key (an operator has to act) before it is asked again.
const lazyRetryAfter = 30 * time.Second

// Lazy is the signer of a wallet whose backend could not be reached when
// the wallet was opened (a KMS or a remote signer away while serve
// starts): its address is the declared one, and each signature first
// opens the backend's signer until that succeeds. Until then every
// signature is a *keystore.UnavailableError, so the wallet's tasks wait and
// its state shows why, rather than the process refusing to start, or the
// wallet being absent, because one backend is briefly away. The opened
// signer's address is checked against the declared one (Opener.Open), so
// a key of another address is never used.
type Lazy struct {
	opener *Opener
	decl   Decl

	mu      sync.Mutex
	signer  keystore.Signer
	pending error
}

var _ keystore.Signer = (*Lazy)(nil)

// NewLazy returns the signer of d (which names its address) that opens
// with o at its first signature; cause is why it could not be opened now.
func NewLazy(o *Opener, d Decl, cause error) *Lazy {
	return &Lazy{opener: o, decl: d, pending: cause}
}

// Address implements keystore.Signer: the declared address.
func (l *Lazy) Address() ledger.Address { return ledger.Address(l.decl.Address) }

// Backend names the declaration's backend.
func (l *Lazy) Backend() string { return l.decl.Backend }

// Pending is why the signer is not open yet; nil once it is.
func (l *Lazy) Pending() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

// SignTx implements keystore.Signer, opening the backend's signer first
// while it is not open.
func (l *Lazy) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	s, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return s.SignTx(ctx, tx, chainID)
}

func (l *Lazy) open(ctx context.Context) (keystore.Signer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signer != nil {
		return l.signer, nil
	}
	s, err := l.opener.Open(ctx, l.decl)
	if err != nil {
		l.pending = err
		var un *keystore.UnavailableError
		if errors.As(err, &un) {
			return nil, err
		}
		// The backend answered and refuses the key: the wallet waits for
		// an operator, as it does for a backend that is away.
		return nil, &keystore.UnavailableError{Backend: l.decl.Backend, Err: err, RetryAfter: lazyRetryAfter}
	}
	l.signer, l.pending = s, nil
	return s, nil
}

// Close releases the opened signer, when there is one.
func (l *Lazy) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signer != nil {
		closeSigner(l.signer)
		l.signer = nil
	}
}

// OpenOrWait opens d's signer; when its backend cannot be reached now and d
// names its address, it returns a Lazy signer instead, which opens at the
// wallet's first signature. Any other error is returned.
func (o *Opener) OpenOrWait(ctx context.Context, d Decl) (s keystore.Signer, waiting bool, err error) {
	s, err = o.Open(ctx, d)
	var un *keystore.UnavailableError
	if err != nil && errors.As(err, &un) && d.Address != ([20]byte{}) {
		return NewLazy(o, d, err), true, nil
	}
	return s, false, err
}
