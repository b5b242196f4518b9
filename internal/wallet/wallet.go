package wallet

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// The wallet lane's per-wallet work, run as the job of the "wallet" shards:
// one shard per (chain, address), so one worker at a time assigns a
// wallet's nonces while other wallets run in parallel.
//
// A run of a wallet's shard is a sequence of Cycles, each collected from
// PostgreSQL, executed against the chain with no database transaction open,
// and committed in one transaction fenced by the shard's claim
// (store.ShardFenced), so a worker whose lease was rescued writes nothing.
// Job only sequences them; the rules are the roles', each beside the
// same role's rules for the other lanes:
//
//  1. recover (submitter.WalletBroadcaster): attempts signed and stored but
//     not known sent are broadcast in nonce order with their stored bytes,
//     after a crash and as the second half of every send;
//  2. confirm, once per run (monitor.WalletConfirmer): the chain's nonce
//     and head, the receipts of what it passed, blocks that left the chain,
//     new broadcasts of what the node may have lost;
//  3. keep moving, each once per run (monitor.WalletKeeper): nonce
//     reconciliation, a gas bump or no-op for a stalled nonce, the balance
//     check, no-ops for freed nonces no task fills;
//  4. send (queuer.WalletSender): waiting tasks in queue order up to the
//     in-flight budget, signed with freed nonces first, then new ones, and
//     stored (the write-ahead) before step 1 of the next cycle broadcasts
//     them.
//
// A collect with none of these to do ends the run; the monitor's
// WalletFollower brings the shard back while it has work the chain must
// finish.

// Kind is the shard kind of the wallet lane: keys
// "wallet:<chain>:<address>" (store.WalletShardKey).
const Kind = "wallet"

// The crash points of the wallet lane (internal/crashpoint): an end-to-end
// test arms one with LEDGERQ_CRASH_AT to SIGKILL the process exactly there.
const (
	// CrashSigned: a signer outside the process signed a send's
	// transactions (their requests recorded), the attempts not stored.
	CrashSigned = "wallet.signed"
	// CrashStored: attempts stored (write-ahead committed), none
	// broadcast.
	CrashStored = "wallet.stored"
	// CrashBroadcast: a transaction broadcast, its result not
	// recorded.
	CrashBroadcast = "wallet.broadcast"
	// CrashMined: receipts found, the confirmation not recorded.
	CrashMined = "wallet.mined"
	// CrashRequestStored: a cancel's no-op or a speed-up stored
	// (write-ahead committed), not broadcast.
	CrashRequestStored = "wallet.request_stored"
)

// Step collects one step of a wallet's run: a workers.Cycle, or nil when
// it has nothing to do now. A step gets its store, ledger and Config when it
// is built; s is the claimed shard: the wallet, its run's memory and the
// lane's shared operations on it (fenced writes, outcome recording,
// signing, broadcasts).
type Step interface {
	Collect(ctx context.Context, s *Shard) (workers.Cycle, error)
}

// KeepStep collects what keeps a wallet moving, given how many of its
// attempts are in flight and how many tasks wait.
type KeepStep interface {
	Collect(ctx context.Context, s *Shard, inFlight, waiting int) (workers.Cycle, error)
}

// SendStep collects a send of waiting tasks.
type SendStep interface {
	Collect(ctx context.Context, s *Shard, tasks []store.Task) (workers.Cycle, error)
}

// Steps are the roles' steps a Job sequences.
type Steps struct {
	// Recover broadcasts what was stored and not known sent (submitter).
	Recover Step
	// Confirm follows the chain, once per run (monitor).
	Confirm Step
	// KeepMoving reconciles, bumps, fills and checks the balance (monitor).
	KeepMoving KeepStep
	// Send signs and stores waiting tasks (queuer).
	Send SendStep
}

// Job sequences the steps of a wallet's run as the wallet shard's
// workers.Job.
type Job struct {
	cfg     Config
	store   *store.Store
	ledger  ledger.WalletLedger
	wallets *keystore.Registry
	steps   Steps

	mu sync.Mutex
	// runs holds each shard's current run in this process, by key.
	runs map[string]*Run
	// sent is when each shard's last send or broadcast was collected in
	// this process, by key (Config.SendLinger): the process's own
	// clock, not Config.Clock (which tells the time written to the
	// database), since the linger is a wait of this process.
	sent map[string]time.Time
	// chainID is the ledger's chain id once read.
	chainID *big.Int
	// heads holds the best head seen per chain, nonces the highest chain
	// nonce read per shard (lagging.go): kept by the Job, which every
	// shard of a chain in this process shares, so that one wallet's read
	// of a caught-up node protects the others from a lagging one.
	heads  map[int64]*headWatch
	nonces map[string]nonceSeen
	// head is the chain's head as the head watcher last read it (NoteHead),
	// and confirmedOn the head each shard's last confirm pass in this
	// process was collected on, by key.
	head        headNote
	confirmedOn map[string]confirmNote
	// signers holds each shard's signer state as this process last
	// recorded it (store.WalletHealthSetSigner), by key: a signature that
	// finds the signer as recorded writes nothing, so a healthy wallet pays
	// no write per signature. Empty after a start: the first outcome is
	// written once (a state the row already holds changes nothing).
	signers map[string]signerNote
	// noting serialises the recording of signer states (noteSigner): a
	// send asks its signatures in parallel, and a signer that refuses
	// them all is written once, not once a signature.
	noting sync.Mutex
}

// signerNote is a signer state recorded: its backend and state.
type signerNote struct {
	backend string
	state   store.SignerState
}

var _ workers.Job = (*Job)(nil)

// NewJob returns the wallet shard's job: it runs the steps for the
// wallets in wallets, through led. cfg gets its defaults (WithDefaults).
func NewJob(st *store.Store, led ledger.WalletLedger, wallets *keystore.Registry, cfg Config, steps Steps) (*Job, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil || led == nil || wallets == nil {
		return nil, errors.New("wallet job: it needs a store, a ledger and a wallet registry")
	}
	if steps.Recover == nil || steps.Confirm == nil || steps.KeepMoving == nil || steps.Send == nil {
		return nil, errors.New("wallet job: every step is needed (recover, confirm, keep moving, send)")
	}
	return &Job{cfg: cfg, store: st, ledger: led, wallets: wallets, steps: steps, runs: map[string]*Run{}, sent: map[string]time.Time{},
		heads: map[int64]*headWatch{}, nonces: map[string]nonceSeen{}, confirmedOn: map[string]confirmNote{},
		signers: map[string]signerNote{}}, nil
}

// Run is what one run of a shard remembers between its cycles.
type Run struct {
	owner string
	run   int64
	// Confirmed: the run's confirm cycle was collected. Confirm runs once
	// per run, so that attempts the chain has not reached end the run
	// instead of being asked about again and again (no spinning).
	Confirmed bool
	// Reconciled, StallChecked, BalanceChecked, NoopsChecked: the run's
	// nonce reconciliation, stall check, balance check and freed-nonce
	// no-ops were collected (each at most once per run).
	Reconciled, StallChecked, BalanceChecked, NoopsChecked bool
	// RequestsChecked: the run collected the cancels and speed-ups clients
	// asked of its executing tasks (at most once per run).
	RequestsChecked bool
	// PreflightWaits: a send found the head of the queue's call reverting
	// while transactions of the wallet are in flight (queuer.WalletSender's
	// preflight): it waits for them, so the run sends nothing more and the
	// follower brings the shard back.
	PreflightWaits bool
	// Paused: the balance check found the balance below the threshold: the
	// run sends nothing.
	Paused bool
	// ChainRead: the run's confirm read and recorded the chain's nonce.
	ChainRead bool
	// UnknownChecked: the run looked for nonces the chain used that no
	// attempt holds (a database restored behind the chain). Recovering: some may
	// remain, or their transactions could not be read: the run signs
	// nothing (no reconciliation, no no-op, no send), since a task waiting
	// here may already be on the chain.
	UnknownChecked, Recovering bool
	// Held: an operator holds the wallet (store.WalletHealthHold): the run
	// sends no new task, and still follows those in flight.
	Held bool
	// ChainNonce is the chain's nonce as this run last learned it.
	ChainNonce uint64
	// Fresh holds the hashes of attempts this run stored and has not
	// broadcast yet: they were certainly never sent.
	Fresh map[string]bool
	// Releasing: a broadcast was rejected since the run's last send, so
	// fresh attempts are released instead of broadcast.
	Releasing bool
}

// runFor returns the state of claim c's run, new at the run's first collect.
// A shard's run numbers grow with each claim: the state of an older run (a
// worker of this process whose lease was rescued, still finishing a cycle)
// never replaces the current one's.
func (j *Job) runFor(c workers.Claim) *Run {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.runs[c.Key]
	if rs != nil && rs.owner == c.Owner && rs.run == c.Run {
		return rs
	}
	fresh := &Run{owner: c.Owner, run: c.Run, Fresh: map[string]bool{}}
	if rs == nil || c.Run > rs.run {
		j.runs[c.Key] = fresh
	}
	return fresh
}

// Shard is one claimed wallet shard, as its steps and cycles see it: the
// claim that fences its writes, the wallet, the run's memory, and the
// lane's operations on them. What a step needs beyond these (the store, the
// ledger, the Config) it was given when it was built.
type Shard struct {
	job    *Job
	Claim  workers.Claim
	Wallet keystore.Wallet
	// Sender is the wallet's address in hex (EIP-55; the store lower-cases
	// it).
	Sender string
	Run    *Run
	// InFlight is how many of the wallet's attempts were signed or sent and
	// not yet mined when the run's step was collected.
	InFlight int
}

// ChainID is the wallet's chain.
func (s *Shard) ChainID() int64 { return s.Wallet.ChainID }

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

// Collect sequences a wallet's run, one cycle at a time: recover, then
// confirm (once per run), then what keeps the wallet moving (once per run),
// then send. It returns nil when none has work, which ends the run.
func (j *Job) Collect(ctx context.Context, c workers.Claim) (workers.Cycle, error) {
	chainID, addr, err := parseKey(c.Key)
	if err != nil {
		return nil, err
	}
	w, ok := j.wallets.BySender(chainID, addr)
	if !ok {
		// Tasks of a wallet this process does not sign for (configuration
		// changed): they wait; the follower does not bring the shard back.
		j.cfg.Logger.Warn("wallet job: no configured wallet for shard, its tasks wait", "shard", c.Key)
		return nil, nil
	}
	s := &Shard{job: j, Claim: c, Wallet: w, Sender: addr.Hex(), Run: j.runFor(c)}
	// A collect after this run's confirm pass: the run was not cut short
	// after it (carryConfirm).
	j.notePassed(c.Key, s.Run)

	if cyc, err := j.steps.Recover.Collect(ctx, s); cyc != nil || err != nil {
		if cyc != nil {
			j.noteSend(c.Key)
		}
		return cyc, err
	}
	live, err := DBCall(ctx, s, func(ctx context.Context) (store.AttemptCounts, error) {
		return j.store.AttemptCountLive(ctx, chainID, s.Sender)
	})
	if err != nil {
		return nil, err
	}
	inFlight := live.InFlight
	s.InFlight = inFlight
	budget := j.cfg.InFlight - inFlight
	if c.Failures > 0 {
		// The last run failed: this one sends the head of the queue alone,
		// so that a task whose send keeps failing is the one that ends in
		// error (the send's Drop), not the tasks sent with it.
		budget = min(budget, 1)
	}
	waiting := func() ([]store.Task, error) {
		if budget <= 0 {
			return nil, nil
		}
		return DBCall(ctx, s, func(ctx context.Context) ([]store.Task, error) {
			return j.store.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: chainID, Sender: s.Sender, Queue: j.cfg.QueueType, Max: budget})
		})
	}
	tasks, err := waiting()
	if err != nil {
		return nil, err
	}
	if at, ok := j.linger(c.Key, len(tasks), budget); ok {
		// The wallet sent a moment ago and has room for more than is
		// waiting: wait for more, then read the waiting tasks again. Only
		// they can change meanwhile: nothing is left to broadcast (recover
		// found nothing) and only this run writes the wallet's attempts.
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		if tasks, err = waiting(); err != nil {
			return nil, err
		}
	}
	if inFlight == 0 && live.Mined == 0 && len(tasks) == 0 {
		if s.Run.Confirmed {
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
	if !s.Run.Confirmed {
		s.Run.Confirmed = true
		// A run of this process confirmed the wallet a moment ago and
		// yielded its worker (carryConfirm): this run goes on with what
		// that pass read.
		if !j.carryConfirm(c.Key, s.Run, len(tasks) > 0) {
			j.noteConfirm(c.Key, s.Run)
			return j.steps.Confirm.Collect(ctx, s)
		}
	}
	if cyc, err := j.steps.KeepMoving.Collect(ctx, s, inFlight, len(tasks)); cyc != nil || err != nil {
		return cyc, err
	}
	if len(tasks) == 0 || s.Run.Paused || s.Run.Held || s.Run.Recovering || s.Run.PreflightWaits {
		return nil, nil
	}
	cyc, err := j.steps.Send.Collect(ctx, s, tasks)
	if cyc != nil {
		j.noteSend(c.Key)
	}
	return cyc, err
}

// headNote is a head read, and when.
type headNote struct {
	ref ledger.BlockRef
	at  time.Time
}

// NoteHead records the chain's head as the head watcher read it
// (monitor.WalletHeadWatcher's OnHead).
func (j *Job) NoteHead(b ledger.BlockRef) {
	j.mu.Lock()
	j.head = headNote{ref: b, at: time.Now()}
	j.mu.Unlock()
}

// noteConfirm records that run's confirm pass of key is collected, on the
// head now known (none without a head watcher).
func (j *Job) noteConfirm(key string, run *Run) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.confirmedOn[key] = confirmNote{head: j.head.ref, headKnown: !j.head.at.IsZero(), at: time.Now(), run: run}
}

// ConfirmRead records what the run's confirm pass read, at the end of the
// pass (its Commit, in the run's own goroutine), for the runs after it
// (carryConfirm).
func (s *Shard) ConfirmRead() {
	j := s.job
	j.mu.Lock()
	defer j.mu.Unlock()
	if n, ok := j.confirmedOn[s.Claim.Key]; ok && n.run == s.Run && !n.read {
		n.read, n.ok, n.chainNonce = true, s.Run.ChainRead && !s.Run.Recovering, s.Run.ChainNonce
		j.confirmedOn[s.Claim.Key] = n
	}
}

// notePassed records that run collects again after its confirm pass of
// key: it went on past the pass, to its sends if it had any.
func (j *Job) notePassed(key string, run *Run) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n, ok := j.confirmedOn[key]; ok && n.run == run && !n.passed {
		n.passed = true
		j.confirmedOn[key] = n
	}
}

// carryConfirm gives run what the last confirm pass of key in this process
// read, and reports true, when that pass read the chain within
// RebroadcastAfter (the FollowInterval when longer) and either
//   - the head read is fresh (the watcher runs) and still the one the pass
//     was collected on: a pass now would learn nothing new, no receipt comes
//     without a block; or
//   - tasks wait, the pass's run ended with the pass (it yielded its
//     worker: under a slow provider a pass takes a run's whole quantum) and
//     no run carried the pass yet: this run sends with what it read, and
//     the run after it confirms again. Confirm and send alternate: neither
//     starves the other, where a pass in every run would leave the wallet
//     never sending.
//
// A new head past a send, or a wallet that stood still for
// RebroadcastAfter, confirms again.
func (j *Job) carryConfirm(key string, run *Run, waiting bool) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	last, ok := j.confirmedOn[key]
	if !ok || !last.ok || time.Since(last.at) >= max(j.cfg.FollowInterval, j.cfg.RebroadcastAfter) {
		return false
	}
	fresh := time.Since(j.head.at) < max(2*j.cfg.HeadInterval, 100*time.Millisecond)
	sameHead := last.headKnown && fresh && last.head == j.head.ref
	unsent := waiting && !last.passed && !last.carried
	if !sameHead && !unsent {
		return false
	}
	last.carried = true
	j.confirmedOn[key] = last
	run.ChainRead, run.ChainNonce = true, last.chainNonce
	return true
}

// confirmNote is a confirm pass collected: on which head (headKnown: the
// head watcher had told one), when, by which run, and, once the pass
// ended, what it read; passed: its run went on past it; carried: a later
// run went on with it.
type confirmNote struct {
	head      ledger.BlockRef
	headKnown bool
	at        time.Time
	run       *Run
	// read: the pass ended; ok: it read the chain's nonce (and nothing
	// holds the wallet in recovery), chainNonce.
	read, ok        bool
	chainNonce      uint64
	passed, carried bool
}

// noteSend records that the shard's run is sending now: signing and storing
// (a send) or broadcasting (recover, the second half of every send).
func (j *Job) noteSend(key string) {
	j.mu.Lock()
	j.sent[key] = time.Now()
	j.mu.Unlock()
}

// linger reports when the run may collect n waiting tasks, with budget room
// in flight, if not now (Config.SendLinger): fewer than the budget
// wait until SendLinger has passed since the wallet's last send or
// broadcast.
func (j *Job) linger(key string, n, budget int) (time.Time, bool) {
	if j.cfg.SendLinger <= 0 || n >= budget {
		return time.Time{}, false
	}
	j.mu.Lock()
	last, ok := j.sent[key]
	j.mu.Unlock()
	at := last.Add(j.cfg.SendLinger)
	return at, ok && time.Now().Before(at)
}

// watched reports whether the wallet's chain nonce moved within
// Config.WatchAfter.
func (j *Job) watched(ctx context.Context, s *Shard) (bool, error) {
	if j.cfg.WatchAfter <= 0 {
		return false, nil
	}
	h, err := DBCall(ctx, s, func(ctx context.Context) (store.WalletHealth, error) {
		return j.store.WalletHealthGet(ctx, s.ChainID(), s.Sender)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return h.ChainNonceSince != nil && j.cfg.Clock.Now().Sub(*h.ChainNonceSince) < j.cfg.WatchAfter, nil
}

// CheckChain makes sure the ledger is the wallet's chain before anything is
// signed for it; the ledger's id is read once.
func (s *Shard) CheckChain(ctx context.Context) error {
	j := s.job
	j.mu.Lock()
	id := j.chainID
	j.mu.Unlock()
	if id == nil {
		var err error
		id, err = LedgerCall(ctx, s, j.ledger.ChainID)
		if err != nil {
			return fmt.Errorf("reading the ledger's chain id: %w", err)
		}
		j.mu.Lock()
		j.chainID = id
		j.mu.Unlock()
	}
	if !id.IsInt64() || id.Int64() != s.Wallet.ChainID {
		return fmt.Errorf("wallet %q is on chain %d but the ledger is chain %s", s.Wallet.ID, s.Wallet.ChainID, id)
	}
	return nil
}

// Fenced runs fn in one transaction fenced by the shard's claim.
func (s *Shard) Fenced(ctx context.Context, fn func(tx *store.Store) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.job.cfg.DBTimeout)
	defer cancel()
	return s.job.store.ShardFenced(ctx, s.Claim, fn)
}

// DBCall runs one database call of shard s under Config.DBTimeout.
func DBCall[T any](ctx context.Context, s *Shard, fn func(context.Context) (T, error)) (T, error) {
	return Within(ctx, s.job.cfg.DBTimeout, fn)
}

// LedgerCall runs one ledger call of shard s under
// Config.LedgerTimeout. A failure that is not the node's own verdict on a
// transaction (ledger.CallRefused) — a rate limit, a 5xx, a reset, a
// timeout, a read that found no answer — is marked workers.Unavailable
// with the node's Retry-After (ledger.RetryAfterOf): a provider's failure
// is never a task's, so a cycle that returns it ends no task and counts no
// failed run, and the wallet's shard runs again within
// --shard-unavailable-backoff. Sends do not come here (Send): their
// outcome is classified by ledger.SendResultOf.
func LedgerCall[T any](ctx context.Context, s *Shard, fn func(context.Context) (T, error)) (T, error) {
	v, err := Within(ctx, s.job.cfg.LedgerTimeout, fn)
	if err != nil && !ledger.CallRefused(err) {
		err = workers.Unavailable(err, ledger.RetryAfterOf(err))
	}
	return v, err
}

// Within runs fn under a deadline d: DBCall and LedgerCall for a shard's
// calls, and the wallet follower's, which has no shard.
func Within[T any](ctx context.Context, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

// Budget is a cycle's Config.CycleBudget, counted from its start in
// real time (it bounds network waits, as the timeouts do).
type Budget struct {
	start time.Time
	limit time.Duration
}

// Budget starts a cycle's budget.
func (s *Shard) Budget() Budget { return Budget{start: time.Now(), limit: s.job.cfg.CycleBudget} }

// Spent reports whether a cycle that has already made calls ledger calls
// must make no more; the first call is always made, so every cycle moves.
func (b Budget) Spent(calls int) bool { return calls > 0 && time.Since(b.start) >= b.limit }

// Send broadcasts raw under Config.LedgerTimeout.
func (s *Shard) Send(ctx context.Context, raw []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.job.cfg.LedgerTimeout)
	defer cancel()
	return s.job.ledger.SendRawTransaction(ctx, raw)
}

// ReadChainNonce reads the wallet's nonce by the latest block.
func (s *Shard) ReadChainNonce(ctx context.Context) (uint64, error) {
	addr := s.Wallet.Address()
	n, err := LedgerCall(ctx, s, func(ctx context.Context) (uint64, error) { return s.job.ledger.NonceAt(ctx, addr) })
	if err != nil {
		return 0, fmt.Errorf("reading the chain's nonce of %s: %w", s.Claim.Key, err)
	}
	return n, nil
}

// LearnChainNonce records a chain nonce the run saw; it only moves up.
func (s *Shard) LearnChainNonce(n uint64) {
	if n > s.Run.ChainNonce {
		s.Run.ChainNonce = n
	}
}

// HashesOfNonce returns our hashes for an attempt's nonce, newest first:
// the attempt's own and those of the gas bumps it superseded (or that
// superseded it), any of which may be the one mined.
func (s *Shard) HashesOfNonce(ctx context.Context, a store.Attempt) ([]string, error) {
	hashes, err := DBCall(ctx, s, func(ctx context.Context) ([]string, error) { return s.job.store.AttemptListHashesOfNonce(ctx, a) })
	if err != nil {
		return nil, err
	}
	if len(hashes) == 0 {
		hashes = []string{a.TxHash}
	}
	return hashes, nil
}

// ReceiptOfNonce looks up the receipts of every hash of a's nonce
// (HashesOfNonce) by hash: the first found, or found false. failed is true
// when a lookup failed and none was found: "ask again later", never
// "absent".
func (s *Shard) ReceiptOfNonce(ctx context.Context, a store.Attempt) (hash string, r ledger.Receipt, failed bool) {
	hashes, err := s.HashesOfNonce(ctx, a)
	if err != nil {
		s.job.cfg.Logger.Debug("wallet: reading the hashes of a nonce failed, asking again later", "shard", s.Claim.Key, "nonce", a.Nonce, "error", err)
		return "", ledger.Receipt{}, true
	}
	for _, h := range hashes {
		rc, err := LedgerCall(ctx, s, func(ctx context.Context) (ledger.Receipt, error) {
			return s.job.ledger.TransactionReceipt(ctx, ledger.TxHash(common.HexToHash(h)))
		})
		switch {
		case err != nil:
			s.job.cfg.Logger.Debug("wallet: receipt lookup failed, asking again later", "shard", s.Claim.Key, "tx_hash", h, "error", err)
			failed = true
		case rc.Found:
			return h, rc, false
		}
	}
	return "", ledger.Receipt{}, failed
}

// Tolerate returns nil for ErrNotFound from a conditional write: the row
// already left the state the write expects (recorded before, in this or an
// earlier run), so there is nothing left to record.
func (s *Shard) Tolerate(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		s.job.cfg.Logger.Warn("wallet: nothing to record, already recorded", "shard", s.Claim.Key, "what", what)
		return nil
	}
	return err
}

// Sign signs tx with the wallet's signer (the key never leaves it) under
// Config.LedgerTimeout. A signer that cannot be reached or throttles
// (*keystore.UnavailableError) makes the run unavailable
// (workers.Unavailable, with the signer's Retry-After): the wallet's tasks
// wait and no failure is counted against them, as for a provider's fault.
// Nothing was signed that ledgerq holds, so nothing can be sent twice.
//
// The signer's state is recorded in the wallet's health when it changes
// (noteSigner): unavailable with the signer's error, ok once it signs again.
// Any other error is the transaction's, not the signer's state: it changes
// nothing recorded.
func (s *Shard) Sign(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	began := time.Now()
	signed, err := Within(ctx, s.job.cfg.LedgerTimeout, func(ctx context.Context) (*types.Transaction, error) {
		return s.Wallet.Signer.SignTx(ctx, tx, chainID)
	})
	backend := keystore.BackendOf(s.Wallet.Signer)
	outcome := "ok"
	defer func() { s.job.cfg.Metrics.SignerCall(backend, outcome, time.Since(began)) }()
	if un, ok := errors.AsType[*keystore.UnavailableError](err); ok {
		outcome = "unavailable"
		s.noteSigner(ctx, backend, store.SignerUnavailable, err)
		return nil, workers.Unavailable(err, un.RetryAfter)
	}
	if err != nil {
		outcome = "error"
		return signed, err
	}
	s.noteSigner(ctx, backend, store.SignerOK, nil)
	return signed, nil
}

// noteSigner records the wallet's signer state in its health when it is
// not the one this process last recorded for the shard. Only the error's
// own text is written (err.Error(): the backends never put a secret in it).
// A failed write fails nothing: the state is only shown to operators, so
// it is logged and tried again at the next signature.
func (s *Shard) noteSigner(ctx context.Context, backend string, state store.SignerState, err error) {
	j := s.job
	note := signerNote{backend: backend, state: state}
	j.noting.Lock()
	defer j.noting.Unlock()
	j.mu.Lock()
	last, ok := j.signers[s.Claim.Key]
	j.mu.Unlock()
	if ok && last == note {
		return
	}
	p := store.WalletSignerParams{Now: j.cfg.Clock.Now(), ChainID: s.ChainID(), Sender: s.Sender, Backend: backend, State: state}
	if err != nil {
		p.Error = err.Error()
	}
	if _, werr := DBCall(ctx, s, func(ctx context.Context) (bool, error) { return j.store.WalletHealthSetSigner(ctx, p) }); werr != nil {
		if ctx.Err() == nil {
			j.cfg.Logger.Warn("wallet: recording the signer's state failed, trying again at the next signature",
				"shard", s.Claim.Key, "backend", backend, "signer_state", string(state), "error", werr)
		}
		return
	}
	j.mu.Lock()
	j.signers[s.Claim.Key] = note
	j.mu.Unlock()
	if state == store.SignerUnavailable {
		j.cfg.Logger.Warn("wallet: the signer is unavailable, the wallet's tasks wait", "shard", s.Claim.Key, "wallet", s.Wallet.ID, "backend", backend, "error", err)
	} else if ok {
		j.cfg.Logger.Info("wallet: the signer signs again", "shard", s.Claim.Key, "wallet", s.Wallet.ID, "backend", backend)
	}
}

// RemoteSigner reports whether the wallet's signer is outside the process
// (an HSM, a KMS, a remote signer: keystore.BackendOf is not "keystore"). A
// signature asked of it exists outside ledgerq even if ledgerq dies before
// it stores the attempt, so the write-ahead across signers records each
// request first (store.SignRequestRecord) and pins its nonce to its content
// until the attempt is stored.
func (s *Shard) RemoteSigner() bool { return keystore.BackendOf(s.Wallet.Signer) != "keystore" }

// SignRaw signs tx (Sign) and encodes it.
func (s *Shard) SignRaw(ctx context.Context, tx *types.Transaction, chainID *big.Int) (store.SignedTx, error) {
	signed, err := s.Sign(ctx, tx, chainID)
	if err != nil {
		return store.SignedTx{}, fmt.Errorf("signing nonce %d for %s: %w", tx.Nonce(), s.Claim.Key, err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return store.SignedTx{}, fmt.Errorf("encoding nonce %d's transaction: %w", tx.Nonce(), err)
	}
	return store.SignedTx{
		Nonce: int64(tx.Nonce()), TxHash: signed.Hash().Hex(), Raw: raw, GasLimit: tx.Gas(),
		MaxFeePerGas: tx.GasFeeCap(), MaxPriorityFeePerGas: tx.GasTipCap(),
	}, nil
}

// IsBump reports whether a superseded an earlier attempt of its nonce (a
// failed read says no).
func (s *Shard) IsBump(ctx context.Context, a store.Attempt) bool {
	hashes, err := s.HashesOfNonce(ctx, a)
	return err == nil && len(hashes) > 1
}

// Outcome is what a broadcast, or a receipt, means for an attempt.
type Outcome int

const (
	// NotTried: not broadcast (the context ended first); it stays signed
	// and the next run's recover broadcasts it.
	NotTried Outcome = iota
	// Sent: the node took it or already had it; with a reason, the outcome
	// was indeterminate (timeout, transport) and it is treated as sent,
	// never recycled, and broadcast again by confirm.
	Sent
	// Mined: one of our hashes for the nonce has a receipt: mined, or, when
	// Final, done.
	Mined
	// Rejected: a deterministic refusal: the task ends in error and the
	// nonce is freed for the next send.
	Rejected
	// Requeued: the attempt will never be mined (another transaction used
	// its nonce, or it was never broadcast and is released): it is dropped
	// and its task goes back to waiting.
	Requeued
)

// Result is one attempt's outcome, recorded by RecordResults.
type Result struct {
	Attempt store.Attempt
	Outcome Outcome
	Reason  string
	// Hash, for Mined: the hash that has the receipt.
	Hash     string
	Reverted bool
	// Block and BlockHash, for Mined: the receipt's block; Final: it is
	// deep enough (the task is done), else the attempt is only mined.
	Block     uint64
	BlockHash string
	Final     bool
	// Replaced: requeued because another transaction took the nonce:
	// counted against MaxReplacements.
	Replaced bool
	// GasUsed and EffectiveGasPrice, for Mined: the receipt's fee (nil
	// price: not known), kept for the wallet's fee caps.
	GasUsed           uint64
	EffectiveGasPrice *big.Int
}

// RecordResults writes outcomes inside a fenced transaction. The block of
// each receipt is one the chain holds (SawBlock).
func (s *Shard) RecordResults(ctx context.Context, tx *store.Store, now time.Time, results []Result) error {
	for _, r := range results {
		if r.Outcome == Mined {
			s.SawBlock(r.Block)
		}
	}
	recorded, err := s.confirmTogether(ctx, tx, now, results)
	if err != nil {
		return err
	}
	var taken []string
	for i, r := range results {
		a := r.Attempt
		var err error
		switch {
		case recorded[i]:
		case r.Outcome == NotTried:
		case r.Outcome == Sent:
			if r.Reason == "" {
				taken = append(taken, a.TxHash)
				continue
			}
			_, err = tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: s.ChainID(), TxHashes: []string{a.TxHash}, Error: r.Reason})
		case r.Outcome == Mined:
			_, err = tx.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: s.ChainID(), TxHash: r.Hash, Live: a.TxHash,
				Block: r.Block, BlockHash: r.BlockHash, Final: r.Final, Reverted: r.Reverted, GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice})
			err = s.Tolerate(err, "confirm")
		case r.Outcome == Rejected:
			err = s.RecordRejected(ctx, tx, now, a, r.Reason)
		case r.Outcome == Requeued:
			_, err = tx.AttemptRequeue(ctx, store.AttemptRequeueParams{
				Now: now, ChainID: s.ChainID(), TxHash: a.TxHash, Reason: r.Reason,
				Replaced: r.Replaced, MaxReplacements: s.job.cfg.MaxReplacements,
			})
			err = s.Tolerate(err, "requeue")
		}
		if err != nil {
			return err
		}
	}
	if len(taken) > 0 {
		if _, err := tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: s.ChainID(), TxHashes: taken}); err != nil {
			return err
		}
	}
	return nil
}

// confirmTogether records the results that are final receipts of a task's
// live attempt (most of a confirm round) with one AttemptConfirmMany, and
// reports which it recorded. When one of them cannot be recorded (a task no
// longer executing, an attempt no longer live) it records none, and
// RecordResults records each alone, tolerating the ones already recorded.
func (s *Shard) confirmTogether(ctx context.Context, tx *store.Store, now time.Time, results []Result) ([]bool, error) {
	recorded := make([]bool, len(results))
	var ps []store.AttemptConfirmParams
	var at []int
	for i, r := range results {
		a := r.Attempt
		if r.Outcome == Mined && r.Final && r.BlockHash != "" && !a.Noop() && a.Kind != store.AttemptCancel && strings.EqualFold(r.Hash, a.TxHash) {
			ps = append(ps, store.AttemptConfirmParams{Now: now, ChainID: s.ChainID(), TxHash: r.Hash, Live: a.TxHash,
				Block: r.Block, BlockHash: r.BlockHash, Final: true, Reverted: r.Reverted, GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice})
			at = append(at, i)
		}
	}
	if len(ps) < 2 {
		return recorded, nil
	}
	_, err := tx.AttemptConfirmMany(ctx, ps)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return recorded, nil
	case err != nil:
		return nil, err
	}
	for _, i := range at {
		recorded[i] = true
	}
	return recorded, nil
}

// RecordRejected records a deterministic rejection: the task ends in error
// alone (a no-op is only dropped: its nonce is free again). A refusal for
// insufficient funds asks for a new balance read before the next send: the
// balance check pauses the wallet only when it cannot pay for a plain
// transfer, never because of one task's value or fees.
func (s *Shard) RecordRejected(ctx context.Context, tx *store.Store, now time.Time, a store.Attempt, reason string) error {
	var err error
	if a.Noop() {
		_, err = tx.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: s.ChainID(), TxHash: a.TxHash, Reason: reason})
		err = s.Tolerate(err, "drop no-op")
	} else {
		_, err = tx.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.TaskID, Reason: reason})
		err = s.Tolerate(err, "fail")
	}
	if err != nil || !strings.HasPrefix(reason, "insufficient funds") {
		return err
	}
	return tx.WalletHealthMarkBalanceStale(ctx, now, s.ChainID(), s.Sender)
}

// LogResults logs what operators need to know: failures and requeues.
func (s *Shard) LogResults(results []Result) {
	for _, r := range results {
		switch r.Outcome {
		case Rejected:
			s.job.cfg.Logger.Warn("wallet: transaction rejected, task failed", "shard", s.Claim.Key, "task", r.Attempt.TaskID,
				"nonce", r.Attempt.Nonce, "tx_hash", r.Attempt.TxHash, "reason", r.Reason)
		case Requeued:
			s.job.cfg.Logger.Info("wallet: attempt dropped, task back to waiting", "shard", s.Claim.Key, "task", r.Attempt.TaskID,
				"nonce", r.Attempt.Nonce, "tx_hash", r.Attempt.TxHash, "reason", r.Reason)
		}
	}
}
