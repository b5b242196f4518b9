package eoa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// Kind is the shard kind the Job runs: keys "wallet:<chain>:<address>"
// (store.WalletShardKey). Register the Job under it in workers.NewPool.
const Kind = "wallet"

// Job is seed 003's per-wallet worker as the wallet shard's workers.Job. One
// run of a wallet's shard is a sequence of cycles, each collected from the
// database:
//
//  1. recover: attempts signed and stored but not known sent, broadcast in
//     nonce order with their stored bytes (after a crash, and as the second
//     half of every send);
//  2. confirm, once per run: the chain's nonce, receipts of the sent
//     attempts it passed, a new broadcast of sent attempts whose last
//     broadcast was indeterminate;
//  3. keep moving, each once per run (stall.go): nonce reconciliation,
//     a gas bump or no-op for a stalled nonce, the balance check (sending
//     pauses below the threshold), no-ops for freed nonces no task fills;
//  4. send: waiting tasks in queue order up to the in-flight budget, signed
//     with freed nonces first, then new ones, and stored (the write-ahead)
//     before the recover cycle that follows broadcasts them.
//
// A collect with none of these to do ends the run; the Follower brings the
// shard back while it has attempts in flight.
type Job struct {
	cfg     Config
	store   *store.Store
	ledger  ledger.WalletLedger
	wallets *keystore.Registry
	log     *slog.Logger

	mu sync.Mutex
	// runs holds each shard's current run in this process, by key.
	runs map[string]*runState
	// absent holds, per shard key, when each sent attempt (by hash) was
	// first seen passed by the chain's nonce without a receipt.
	absent map[string]map[string]time.Time
	// watch holds, per shard key, what the wallet's last confirm saw of the
	// chain's nonce.
	watch map[string]*chainWatch
	// chainID is the ledger's chain id once read.
	chainID *big.Int
}

var _ workers.Job = (*Job)(nil)

// NewJob returns the wallet shard's job: it sends the tasks of the wallets
// in wallets through led.
func NewJob(st *store.Store, led ledger.WalletLedger, wallets *keystore.Registry, cfg Config) (*Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil || led == nil || wallets == nil {
		return nil, errors.New("eoa: a job needs a store, a ledger and a wallet registry")
	}
	cfg = cfg.withDefaults()
	return &Job{
		cfg: cfg, store: st, ledger: led, wallets: wallets, log: cfg.Logger,
		runs: map[string]*runState{}, absent: map[string]map[string]time.Time{}, watch: map[string]*chainWatch{},
	}, nil
}

// runState is what one run of a shard remembers between its cycles.
type runState struct {
	owner string
	run   int64
	// confirmed: the run's confirm cycle was collected. Confirm runs once per
	// run, so that attempts the chain has not reached end the run instead
	// of being asked about again and again (no spinning).
	confirmed bool
	// reconciled, stallChecked, balanceChecked, noopsChecked: the run's
	// nonce reconciliation, stall check, balance check and freed-nonce
	// no-ops were collected (each at most once per run).
	reconciled, stallChecked, balanceChecked, noopsChecked bool
	// paused: the balance check found the balance below the threshold: the
	// run sends nothing.
	paused bool
	// chainNonce is the chain's nonce as this run last learned it.
	chainNonce uint64
	// fresh holds the hashes of attempts this run stored and has not
	// broadcast yet: they were certainly never sent.
	fresh map[string]bool
	// releasing: a broadcast was rejected since the run's last send, so
	// fresh attempts are released instead of broadcast (broadcastCycle).
	releasing bool
}

// runFor returns the state of claim c's run, new at the run's first collect.
// A shard's run numbers grow with each claim: the state of an older run (a
// worker of this process whose lease was rescued, still finishing a cycle)
// never replaces the current one's.
func (j *Job) runFor(c workers.Claim) *runState {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.runs[c.Key]
	if rs != nil && rs.owner == c.Owner && rs.run == c.Run {
		return rs
	}
	fresh := &runState{owner: c.Owner, run: c.Run, fresh: map[string]bool{}}
	if rs == nil || c.Run > rs.run {
		j.runs[c.Key] = fresh
	}
	return fresh
}

// shard is one claimed wallet shard, as its cycles see it.
type shard struct {
	job    *Job
	claim  workers.Claim
	wallet keystore.Wallet
	// sender is the wallet's address in hex (EIP-55; the store lower-cases it).
	sender string
	run    *runState
}

func (s *shard) chainID() int64 { return s.wallet.ChainID }

// parseKey splits a wallet shard key into its chain and address.
func parseKey(key string) (int64, ledger.Address, error) {
	rest, ok := strings.CutPrefix(key, Kind+":")
	if !ok {
		return 0, ledger.Address{}, fmt.Errorf("shard key %q is not a wallet's", key)
	}
	chain, addr, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, ledger.Address{}, fmt.Errorf("shard key %q has no address", key)
	}
	id, err := strconv.ParseInt(chain, 10, 64)
	if err != nil {
		return 0, ledger.Address{}, fmt.Errorf("shard key %q: chain id: %w", key, err)
	}
	if !common.IsHexAddress(addr) {
		return 0, ledger.Address{}, fmt.Errorf("shard key %q: %q is not an address", key, addr)
	}
	return id, ledger.Address(common.HexToAddress(addr)), nil
}

// Collect is seed 003's run, one cycle at a time: recover, then confirm
// (once per run), then what keeps the wallet moving (once per run), then
// send. It returns
// nil when none has work, which ends the run.
func (j *Job) Collect(ctx context.Context, c workers.Claim) (workers.Cycle, error) {
	chainID, addr, err := parseKey(c.Key)
	if err != nil {
		return nil, err
	}
	w, ok := j.wallets.BySender(chainID, addr)
	if !ok {
		// Tasks of a wallet this process does not sign for (configuration
		// changed): they wait; the Follower does not bring the shard back.
		j.log.Warn("eoa: no configured wallet for shard, its tasks wait", "shard", c.Key)
		return nil, nil
	}
	s := &shard{job: j, claim: c, wallet: w, sender: addr.Hex(), run: j.runFor(c)}

	unsent, err := dbCall(ctx, j, func(ctx context.Context) ([]store.Attempt, error) {
		return j.store.AttemptsUnsent(ctx, store.AttemptsListParams{ChainID: chainID, Sender: s.sender, Max: j.cfg.InFlight})
	})
	if err != nil {
		return nil, err
	}
	if len(unsent) > 0 {
		return &broadcastCycle{shard: s, attempts: unsent}, nil
	}

	live, err := dbCall(ctx, j, func(ctx context.Context) (store.AttemptsLive, error) {
		return j.store.AttemptsInFlight(ctx, chainID, s.sender)
	})
	if err != nil {
		return nil, err
	}
	inFlight := live.InFlight
	budget := j.cfg.InFlight - inFlight
	if c.Failures > 0 {
		// The last run failed: this one sends the head of the queue alone,
		// so that a task whose send keeps failing is the one that ends in
		// error (sendCycle.Drop), not the tasks sent with it.
		budget = min(budget, 1)
	}
	var tasks []store.Task
	if budget > 0 {
		tasks, err = dbCall(ctx, j, func(ctx context.Context) ([]store.Task, error) {
			return j.store.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: chainID, Sender: s.sender, Queue: j.cfg.QueueType, Max: budget})
		})
		if err != nil {
			return nil, err
		}
	}
	if inFlight == 0 && live.Mined == 0 && len(tasks) == 0 {
		if s.run.confirmed {
			return nil, nil
		}
		// Nothing in flight: a wallet whose chain nonce moved a short while
		// ago is still checked once, in case the chain lost its final
		// transactions.
		watched, err := j.watched(ctx, s)
		if err != nil || !watched {
			return nil, err
		}
	}
	if !s.run.confirmed {
		s.run.confirmed = true
		return &confirmCycle{shard: s}, nil
	}
	if cyc, err := j.collectKeepMoving(ctx, s, inFlight, len(tasks)); cyc != nil || err != nil {
		return cyc, err
	}
	if len(tasks) == 0 || s.run.paused {
		return nil, nil
	}
	return j.collectSend(ctx, s, tasks)
}

// watched reports whether the wallet's chain nonce moved within
// Config.WatchAfter.
func (j *Job) watched(ctx context.Context, s *shard) (bool, error) {
	if j.cfg.WatchAfter <= 0 {
		return false, nil
	}
	h, err := dbCall(ctx, j, func(ctx context.Context) (store.WalletHealth, error) {
		return j.store.WalletHealthGet(ctx, s.chainID(), s.sender)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return h.ChainNonceSince != nil && s.now().Sub(*h.ChainNonceSince) < j.cfg.WatchAfter, nil
}

// checkChain makes sure the ledger is the wallet's chain before anything is
// signed for it; the ledger's id is read once.
func (s *shard) checkChain(ctx context.Context) error {
	j := s.job
	j.mu.Lock()
	id := j.chainID
	j.mu.Unlock()
	if id == nil {
		var err error
		id, err = ledgerCall(ctx, j, j.ledger.ChainID)
		if err != nil {
			return fmt.Errorf("reading the ledger's chain id: %w", err)
		}
		j.mu.Lock()
		j.chainID = id
		j.mu.Unlock()
	}
	if !id.IsInt64() || id.Int64() != s.wallet.ChainID {
		return fmt.Errorf("wallet %q is on chain %d but the ledger is chain %s", s.wallet.ID, s.wallet.ChainID, id)
	}
	return nil
}

// fenced runs fn in one transaction fenced by the shard's claim.
func (s *shard) fenced(ctx context.Context, fn func(tx *store.Store) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.job.cfg.DBTimeout)
	defer cancel()
	return s.job.store.ShardFenced(ctx, s.claim, fn)
}

func (s *shard) now() time.Time { return s.job.cfg.Clock.Now() }

// dbCall runs one database call under Config.DBTimeout.
func dbCall[T any](ctx context.Context, j *Job, fn func(context.Context) (T, error)) (T, error) {
	return within(ctx, j.cfg.DBTimeout, fn)
}

// ledgerCall runs one ledger call under Config.LedgerTimeout.
func ledgerCall[T any](ctx context.Context, j *Job, fn func(context.Context) (T, error)) (T, error) {
	return within(ctx, j.cfg.LedgerTimeout, fn)
}

func within[T any](ctx context.Context, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

// budget is a cycle's Config.CycleBudget, counted from its start in real
// time (it bounds network waits, as the timeouts do).
type budget struct {
	start time.Time
	limit time.Duration
}

func (s *shard) budget() budget { return budget{start: time.Now(), limit: s.job.cfg.CycleBudget} }

// spent reports whether a cycle that has already made calls ledger calls
// must make no more; the first call is always made, so every cycle moves.
func (b budget) spent(calls int) bool { return calls > 0 && time.Since(b.start) >= b.limit }

// send broadcasts raw under Config.LedgerTimeout.
func (s *shard) send(ctx context.Context, raw []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.job.cfg.LedgerTimeout)
	defer cancel()
	return s.job.ledger.SendRawTransaction(ctx, raw)
}

// chainNonce reads the wallet's nonce by the latest block.
func (s *shard) readChainNonce(ctx context.Context) (uint64, error) {
	addr := s.wallet.Address()
	n, err := ledgerCall(ctx, s.job, func(ctx context.Context) (uint64, error) { return s.job.ledger.NonceAt(ctx, addr) })
	if err != nil {
		return 0, fmt.Errorf("reading the chain's nonce of %s: %w", s.claim.Key, err)
	}
	return n, nil
}

// learnChainNonce records a chain nonce the run saw; it only moves up.
func (s *shard) learnChainNonce(n uint64) {
	if n > s.run.chainNonce {
		s.run.chainNonce = n
	}
}

// hashesOfNonce returns our hashes for an attempt's nonce, newest first:
// the attempt's own and those of the gas bumps it superseded (or that
// superseded it), any of which may be the one mined.
func (s *shard) hashesOfNonce(ctx context.Context, a store.Attempt) ([]string, error) {
	hashes, err := dbCall(ctx, s.job, func(ctx context.Context) ([]string, error) { return s.job.store.AttemptHashesOfNonce(ctx, a) })
	if err != nil {
		return nil, err
	}
	if len(hashes) == 0 {
		hashes = []string{a.TxHash}
	}
	return hashes, nil
}

// receiptOfNonce looks up the receipts of every hash of a's nonce
// (hashesOfNonce); a failed read of the hashes is a failed lookup.
func (s *shard) receiptOfNonce(ctx context.Context, a store.Attempt) (hash string, r ledger.Receipt, failed bool) {
	hashes, err := s.hashesOfNonce(ctx, a)
	if err != nil {
		s.job.log.Debug("eoa: reading the hashes of a nonce failed, asking again later", "shard", s.claim.Key, "nonce", a.Nonce, "error", err)
		return "", ledger.Receipt{}, true
	}
	return s.receiptOf(ctx, hashes)
}

// receiptOf looks up the receipts of hashes: the first found, or found
// false. failed is true when a lookup failed and none was found: "ask again
// later", never "absent".
func (s *shard) receiptOf(ctx context.Context, hashes []string) (hash string, r ledger.Receipt, failed bool) {
	for _, h := range hashes {
		rc, err := ledgerCall(ctx, s.job, func(ctx context.Context) (ledger.Receipt, error) {
			return s.job.ledger.TransactionReceipt(ctx, ledger.TxHash(common.HexToHash(h)))
		})
		switch {
		case err != nil:
			s.job.log.Debug("eoa: receipt lookup failed, asking again later", "shard", s.claim.Key, "tx_hash", h, "error", err)
			failed = true
		case rc.Found:
			return h, rc, false
		}
	}
	return "", ledger.Receipt{}, failed
}

// tolerate returns nil for ErrNotFound from a conditional write: the row
// already left the state the write expects (recorded before, in this or an
// earlier run), so there is nothing left to record.
func (s *shard) tolerate(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		s.job.log.Warn("eoa: nothing to record, already recorded", "shard", s.claim.Key, "what", what)
		return nil
	}
	return err
}
