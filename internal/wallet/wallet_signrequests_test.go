package wallet_test

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
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

// slowRemoteSigner is a signer outside the process with a round trip: each
// signature waits, and it checks, as it is asked, that the request for the
// nonce was recorded first (the write-ahead across signers); it keeps the
// most signatures it was asked at once.
type slowRemoteSigner struct {
	keystore.Signer
	t         *testing.T
	e         *env
	wait      time.Duration
	mu        sync.Mutex
	now, most int
	unrecord  []uint64 // nonces asked before their request was recorded
}

func (s *slowRemoteSigner) Backend() string { return "test-remote" }

func (s *slowRemoteSigner) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	recorded := false
	for _, p := range s.e.signRequests(s.t) {
		recorded = recorded || p.Nonce == int64(tx.Nonce())
	}
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	if !recorded {
		s.unrecord = append(s.unrecord, tx.Nonce())
	}
	s.mu.Unlock()
	time.Sleep(s.wait)
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return s.Signer.SignTx(ctx, tx, chainID)
}

// A send asks its signatures of a signer with a round trip SignParallel at
// a time, never more, and only once every nonce's request is recorded: a
// wallet behind an HSM or a KMS pays a round trip per SignParallel tasks,
// and the write-ahead across signers still holds. Every task is done once,
// with contiguous nonces, on the chain.
func TestWallet_ASendAsksItsSignaturesInParallelOnceEveryRequestIsRecorded(t *testing.T) {
	t.Parallel()
	var signer *slowRemoteSigner
	e := setup(t, options{
		cfg: func(c *wallet.Config) { c.SignParallel = 4 },
		signer: func(s keystore.Signer) keystore.Signer {
			signer = &slowRemoteSigner{Signer: s, wait: 50 * time.Millisecond}
			return signer
		},
	})
	signer.t, signer.e = t, e
	tasks := e.postN(t, 10)
	_, pool := e.newProcess(t, e.led)
	e.drive(t, pool, 20, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	e.requireOneTxPerNonce(t, 0)
	require.Equal(t, 4, signer.most, "signatures asked at once")
	require.Empty(t, signer.unrecord, "nonces asked of the signer before their request was recorded")
}
