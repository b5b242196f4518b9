package wallet_test

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// remoteSigner stands for a signer outside the process (an HSM, a KMS, a
// remote signer): it signs with the key it wraps and keeps, as such a
// signer's audit log does, every content it was asked to sign at each
// nonce.
type remoteSigner struct {
	keystore.Signer
	mu    sync.Mutex
	asked map[uint64]map[string]bool
}

func (s *remoteSigner) Backend() string { return "test-remote" }

func (s *remoteSigner) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	s.mu.Lock()
	if s.asked == nil {
		s.asked = map[uint64]map[string]bool{}
	}
	if s.asked[tx.Nonce()] == nil {
		s.asked[tx.Nonce()] = map[string]bool{}
	}
	s.asked[tx.Nonce()][fmt.Sprintf("chain %s to %s value %s data %x", chainID, tx.To(), tx.Value(), tx.Data())] = true
	s.mu.Unlock()
	return s.Signer.SignTx(ctx, tx, chainID)
}

// contents returns how many contents the signer was asked at each nonce.
func (s *remoteSigner) contents() map[uint64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint64]int{}
	for n, c := range s.asked {
		out[n] = len(c)
	}
	return out
}

func (e *env) signRequests(t *testing.T) []store.PinnedRequest {
	t.Helper()
	pins, err := e.st.SignRequestListPinned(t.Context(), chainID, e.wallets[0].Address().Hex(), 0)
	require.NoError(t, err)
	return pins
}

// The write-ahead across signers: a process dies after a signer outside it
// signed a send and before the attempts were stored. A task of higher
// priority arrives, so that queue order would now give the first nonce to
// it. The next process asks the signer again at each nonce with the
// content it asked before, the new task takes the nonce after them, and
// every task is done once on the chain with contiguous nonces.
func TestWallet_ANonceAskedOfARemoteSignerIsNeverAskedWithOtherContent(t *testing.T) {
	t.Parallel()
	var signer *remoteSigner
	e := setup(t, options{signer: func(s keystore.Signer) keystore.Signer {
		signer = &remoteSigner{Signer: s}
		return signer
	}})
	tasks := e.postN(t, 3)
	crashed, _ := e.newProcess(t, e.led)
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
		return isCycle(cyc, "*queuer.sendCycle") && step == "commit"
	})
	require.Equal(t, map[uint64]int{0: 1, 1: 1, 2: 1}, signer.contents(), "the dead process had the three signed")
	require.Len(t, e.signRequests(t), 3, "and their requests recorded")
	for _, task := range tasks {
		require.Empty(t, e.attempts(t, task), "nothing was stored")
	}

	first := e.post(t, 0, 10, 5000, nil)
	e.expireLeases(t)
	_, pool := e.newProcess(t, e.led)
	all := append(tasks, first)
	e.drive(t, pool, 20, all...)
	for nonce, n := range signer.contents() {
		require.Equal(t, 1, n, "nonce %d was asked of the signer with %d contents", nonce, n)
	}
	nonces := e.requireDoneOnce(t, all...)
	e.requireContiguous(t, 0, 0, nonces)
	require.Equal(t, int64(3), nonces[3], "the new task took the nonce after the pinned ones")
	e.requireOneTxPerNonce(t, 0)
	require.Empty(t, e.signRequests(t), "every request's attempt is stored")
}

// A wallet whose key is in the process records no request: a signature it
// made and never stored exists nowhere, and its sends make no statement for
// the rule.
func TestWallet_AKeystoreWalletRecordsNoSignRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.postN(t, 3)
	crashed, _ := e.newProcess(t, e.led)
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
		return isCycle(cyc, "*queuer.sendCycle") && step == "commit"
	})
	require.Empty(t, e.signRequests(t))
}
