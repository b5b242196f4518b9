package eoa

import (
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures a Job and its Follower.
type Config struct {
	// InFlight is seed 003's in-flight budget (MAX_INFLIGHT_PER_EOA): the
	// most attempts a wallet has signed or sent and not yet confirmed. A send
	// takes at most this many minus those.
	InFlight int
	// QueueType is the order in which a wallet's waiting tasks are sent
	// (seed 004's sendTxQueueType).
	QueueType store.QueueType
	// LedgerTimeout bounds each ledger call.
	LedgerTimeout time.Duration
	// DBTimeout bounds each database call (a fenced commit is one call).
	DBTimeout time.Duration
	// CycleBudget bounds the ledger calls of one cycle: past it, a cycle
	// makes no new call and leaves the rest of its work (attempts to
	// broadcast, receipts to look up, tasks to sign) to the next one. A
	// cycle so lasts at most CycleBudget plus one LedgerTimeout, which must
	// fit well inside the shard lease (workers.Config.Lease) even when the
	// node stops answering.
	CycleBudget time.Duration
	// ReplacedAfter is how long a sent attempt's nonce must have been passed
	// by the chain, with every receipt lookup of its hashes answering "no
	// receipt", before the attempt counts as replaced (DESIGN §7: a failed
	// lookup is never "absent"; a node that has not indexed a new block yet
	// is not either) and its task is sent again.
	ReplacedAfter time.Duration
	// MaxFailures is the number of consecutive failed runs after which the
	// task at the head of the queue ends in error when its send keeps
	// failing for a reason of its own (its gas estimate refused while the
	// node answers, a value the database or the signer refuses): one task
	// must not hold up its wallet forever, and failed work is not retried
	// forever. After a failed run a send takes that one task alone, so the
	// task that fails is the one that ends in error.
	MaxFailures int
	// Confirmations is how many blocks deep (its own block counting as one)
	// a transaction must be before its task is done; until then the task is
	// executing, its attempt mined, and each pass checks that its block is
	// still on the chain. 0: DefaultConfirmations of the wallet's chain.
	Confirmations int
	// RebroadcastAfter: while the chain's nonce has not moved for this long
	// with transactions sent past it, they are broadcast again with the same
	// bytes (a node that restarted or lost its pool has forgotten them),
	// at most once per RebroadcastAfter.
	RebroadcastAfter time.Duration
	// WatchAfter: a wallet whose chain nonce moved within it is followed
	// although it has nothing in flight, so that final transactions a node
	// then loses (a crash, a restore from an older state) are sent again.
	WatchAfter time.Duration
	// FollowInterval is the Follower's interval: how often the shard of a
	// wallet with attempts in flight runs, to confirm them.
	FollowInterval time.Duration
	// StallTimeout is how long the chain's nonce must not have moved, with
	// one of our attempts holding it, before that attempt is bumped (signed
	// again with higher fees), or, if none holds it, a no-op fills it. A
	// bump waits StallTimeout again before the next one, unless the node
	// refused it as underpriced (then the next run bumps again).
	StallTimeout time.Duration
	// PriceCap caps a bump's fee cap (and tip), in wei; nil or zero: no cap.
	// A bump the cap stops leaves the task as it is and tells the operator
	// (a warn log, the task's PriceCappedAt, OnPriceCapped).
	PriceCap *big.Int
	// OnPriceCapped, when set, is called once each time a task's bump is
	// first stopped by PriceCap (the hook for webhooks).
	OnPriceCapped func(PriceCapped)
	// ResetGap: a next nonce more than ResetGap above the chain's with
	// nothing in flight is reset to the chain's (recorded on the wallet's
	// health row); 0 means InFlight.
	ResetGap int
	// MaxRecycled: with more freed nonces than this (seed 003's
	// MAX_RECYCLED_THRESHOLD), they are filled with no-ops at once rather
	// than left for waiting tasks.
	MaxRecycled int
	// BalanceMaxAge is how old the stored balance may be before a send reads
	// it again; sending pauses while it is below the wallet's threshold.
	BalanceMaxAge time.Duration
	// MaxReplacements is how many times a task whose nonce another
	// transaction took goes back to waiting; once more and it ends in
	// error. 0: a replaced task ends in error at once.
	MaxReplacements int
	// Metrics, when set, counts what keeps wallets moving: the lane
	// "wallet" outcomes bumped, noop, nonce_reset, paused and replaced.
	Metrics *metrics.Metrics
	// Clock tells the time written to the database; nil is clock.Real.
	Clock clock.Clock
	// Logger gets the worker's logs (never a key); nil discards them.
	Logger *slog.Logger
}

// Defaults returns seed 003's settings: a budget of 100, the priority queue,
// and a Follower interval of one second.
func Defaults() Config {
	return Config{
		InFlight:       100,
		QueueType:      store.QueuePriority,
		LedgerTimeout:  10 * time.Second,
		DBTimeout:      5 * time.Second,
		CycleBudget:    5 * time.Second,
		ReplacedAfter:  time.Minute,
		MaxFailures:    10,
		FollowInterval: time.Second,

		RebroadcastAfter: 15 * time.Second,
		WatchAfter:       time.Minute,

		StallTimeout:    5 * time.Minute,
		MaxRecycled:     50,
		BalanceMaxAge:   5 * time.Minute,
		MaxReplacements: 3,
	}
}

// PriceCapped is what OnPriceCapped is told: a task's stalled transaction
// could not be bumped within Config.PriceCap.
type PriceCapped struct {
	// Shard is the wallet's shard key; Wallet its configured name.
	Shard, Wallet string
	TaskID        string
	Nonce         int64
	// FeeCap is the fee cap of the task's newest attempt, in wei.
	FeeCap *big.Int
}

// Validate reports the settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.InFlight < 1 {
		errs = append(errs, fmt.Errorf("wallet in-flight budget must be at least 1, got %d", c.InFlight))
	}
	if c.QueueType != store.QueuePriority && c.QueueType != store.QueueFIFO {
		errs = append(errs, fmt.Errorf("wallet queue type must be %q or %q, got %q", store.QueuePriority, store.QueueFIFO, c.QueueType))
	}
	if c.ResetGap < 0 || c.MaxRecycled < 0 || c.MaxReplacements < 0 {
		errs = append(errs, fmt.Errorf("wallet reset gap, max recycled and max replacements must not be negative, got %d, %d, %d", c.ResetGap, c.MaxRecycled, c.MaxReplacements))
	}
	if c.PriceCap != nil && c.PriceCap.Sign() < 0 {
		errs = append(errs, fmt.Errorf("wallet price cap must not be negative, got %s", c.PriceCap))
	}
	if c.MaxFailures < 1 {
		errs = append(errs, fmt.Errorf("wallet max failures must be at least 1, got %d", c.MaxFailures))
	}
	if c.Confirmations < 0 || c.Confirmations > maxConfirmations {
		errs = append(errs, fmt.Errorf("wallet confirmations must be from 0 (by chain) to %d, got %d", maxConfirmations, c.Confirmations))
	}
	if c.WatchAfter < 0 {
		errs = append(errs, fmt.Errorf("wallet watch-after must not be negative, got %s", c.WatchAfter))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ledger timeout", c.LedgerTimeout}, {"database timeout", c.DBTimeout}, {"cycle budget", c.CycleBudget},
		{"follow interval", c.FollowInterval}, {"stall timeout", c.StallTimeout}, {"balance max age", c.BalanceMaxAge},
		{"rebroadcast after", c.RebroadcastAfter},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("wallet %s must be positive, got %s", d.name, d.v))
		}
	}
	if c.ReplacedAfter < 0 {
		errs = append(errs, fmt.Errorf("wallet replaced-after must not be negative, got %s", c.ReplacedAfter))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.ResetGap == 0 {
		c.ResetGap = c.InFlight
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// maxConfirmations bounds Config.Confirmations (a day of 12 s blocks is
// 7200).
const maxConfirmations = 10_000

// DefaultConfirmations is how many blocks deep a transaction must be on
// chainID before its task is done, when Config.Confirmations is 0: 1 on
// development chains (geth --dev's 1337, Hardhat's and Anvil's 31337), whose
// blocks come from one node that no one else can reorganize; 64 on Polygon
// PoS (137), whose reorganizations have run that deep; 15 on BNB Smart
// Chain (56); 12 everywhere else (Ethereum mainnet and its test networks
// included: past about a dozen blocks a reorganization of proof-of-stake
// Ethereum has not been seen; the chain's finality comes later still).
func DefaultConfirmations(chainID int64) int {
	switch chainID {
	case 1337, 31337:
		return 1
	case 137:
		return 64
	case 56:
		return 15
	}
	return 12
}

// confirmations is the depth a transaction must reach on chainID.
func (c Config) confirmations(chainID int64) int {
	if c.Confirmations > 0 {
		return c.Confirmations
	}
	return DefaultConfirmations(chainID)
}

// The crash points of the worker (internal/crashpoint): an end-to-end test
// arms one with LEDGERQ_CRASH_AT to SIGKILL the process exactly there.
const (
	// CrashStored: attempts stored (write-ahead committed), none broadcast.
	CrashStored = "eoa.stored"
	// CrashBroadcast: a transaction broadcast, its result not recorded.
	CrashBroadcast = "eoa.broadcast"
	// CrashMined: receipts found, the confirmation not recorded.
	CrashMined = "eoa.mined"
)
