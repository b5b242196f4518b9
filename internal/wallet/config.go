package wallet

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures the wallet lane's per-wallet work: the Job, the role
// steps it runs and the monitor's follower and head watcher. Defaults() is
// the lane's default configuration; every constructor that takes it
// applies WithDefaults, then Validate, so a zero Config works (with the
// settings whose zero means something at zero), as the batch and builder
// lanes' Configs do. Its tags declare the settings an operator sets
// (internal/config): in the wallet lane's section, flags --wallet-*.
type Config struct {
	// InFlight is the in-flight budget: the most attempts a wallet has
	// signed or sent and not yet mined. A send takes at most this many
	// minus those.
	InFlight int `flag:"in-flight" help:"most transactions a wallet has signed or sent and not yet confirmed"`
	// QueueType is the order in which a wallet's waiting tasks are sent.
	QueueType store.QueueType `flag:"queue-type" help:"order of a wallet's waiting tasks: priority (highest first, then oldest) or fifo"`
	// LedgerTimeout bounds each ledger call.
	LedgerTimeout time.Duration `flag:"ledger-timeout" help:"timeout of one call to the chain"`
	// DBTimeout bounds each database call (a fenced commit is one call).
	DBTimeout time.Duration
	// CycleBudget bounds the ledger calls of one cycle: past it, a cycle
	// makes no new call and leaves the rest of its work to the next one. A
	// cycle so lasts at most CycleBudget plus one LedgerTimeout, which must
	// fit well inside the shard lease (workers.Config.Lease) even when the node
	// stops answering.
	CycleBudget time.Duration `flag:"cycle-budget" help:"a cycle of a wallet's run makes no new call to the chain past this; with --wallet-ledger-timeout it must fit twice in --shard-lease"`
	// ReplacedAfter is how long a sent attempt's nonce must have been taken
	// by another transaction the chain's blocks show, with none of our
	// hashes mined, before the attempt counts as replaced and its task is
	// sent again.
	ReplacedAfter time.Duration `flag:"replaced-after" help:"how long another transaction must hold a task's nonce in the chain's blocks, with no receipt of ours, before the task counts as replaced and is sent again"`
	// MaxFailures is the number of consecutive failed runs after which the
	// task at the head of the queue ends in error when its send keeps
	// failing for a reason of its own (the node's verdict on its gas
	// estimate, a value the database or the signer refuses; a ledger that
	// does not answer is no failed run, workers.Unavailable): one task
	// must not hold up its wallet forever, and failed work is not retried
	// forever. After a failed run a send takes that one task alone, so the
	// task that fails is the one that ends in error.
	MaxFailures int
	// Confirmations is how many blocks deep (its own block counting as one)
	// a transaction must be before its task is done; until then the task is
	// executing, its attempt mined, and each pass checks that its block is
	// still on the chain. 0: DefaultConfirmations of the wallet's chain.
	Confirmations int `flag:"confirmations" help:"blocks deep (its own block counting as one) a transaction must be before its task is done; until then it is executing and a block that leaves the chain sends it again (0: by chain id: 1 on dev chains 1337 and 31337, 64 on Polygon (137), 15 on BNB Smart Chain (56), 12 elsewhere)"`
	// RebroadcastAfter: while the chain's nonce has not moved for this long
	// with transactions sent past it, they are broadcast again with the same
	// bytes (a node that restarted or lost its pool has forgotten them),
	// at most once per RebroadcastAfter.
	RebroadcastAfter time.Duration `flag:"rebroadcast-after" help:"while a wallet's chain nonce has not moved for this long, its sent transactions are broadcast again with the same bytes (a node that restarted forgets its pool)"`
	// SendLinger: while a wallet has fewer tasks waiting than its
	// in-flight budget takes (none included), its run collects them only
	// once SendLinger has passed since its last send or broadcast in this
	// process, so that tasks arriving one by one go out in rounds rather
	// than a round each; a send that fills the budget, or the first after
	// a quiet spell, goes at once. The run waits in its worker, holding the
	// shard, so that the next send costs no new claim and no second confirm
	// pass; it must be below CycleBudget. 0: every send goes at once.
	SendLinger time.Duration `flag:"send-linger" help:"while a wallet has fewer tasks waiting than --wallet-in-flight leaves room for, they are sent once this has passed since its last send, so that tasks arriving one by one go out in rounds; a full send, or the first after a quiet spell, goes at once; below --wallet-cycle-budget (0: every send at once)"`
	// WatchAfter: a wallet whose chain nonce moved within it is followed
	// although it has nothing in flight, so that final transactions a node
	// then loses (a crash, a restore from an older state) are sent again.
	WatchAfter time.Duration `flag:"watch-after" help:"a wallet whose chain nonce moved within this is still checked with nothing in flight, so that final transactions a node then loses are sent again (0: only while it has work)"`
	// RewindAfter is how long every read of a chain must answer a head
	// below the highest this process has seen before the lane believes the
	// chain went back (a node restored from an older state, a crash that
	// lost the last blocks): until then such a read is a lagging node's
	// (one backend of a load balancer, a node behind the others) and
	// nothing is decided on it (lagging.go). A few of the chain's block
	// intervals: a lagging node's answers mixed with a caught-up node's
	// never last it. The node layer (evmnodes) holds the highest head as
	// long.
	RewindAfter time.Duration `flag:"rewind-after" help:"how long every read of a chain must answer a head below the highest seen before the lane believes the chain went back; until then such an answer is a lagging node's and nothing is decided on it"`
	// FollowInterval is the WalletFollower's interval: how often the shard
	// of a wallet with attempts in flight runs, to confirm them.
	FollowInterval time.Duration `flag:"follow-interval" help:"how often a wallet with transactions in flight is checked for receipts"`
	// HeadInterval is how often the chain's head is read, so that the
	// follower runs as soon as a new block is there (WalletHeadWatcher); 0
	// turns that off, and wallets are followed every FollowInterval only.
	HeadInterval time.Duration `flag:"head-interval" help:"how often the chain's head is read (one call per process); a new block checks the wallets with transactions in flight at once instead of at the next --wallet-follow-interval (0: off)"`
	// StallTimeout is how long the chain's nonce must not have moved, with
	// one of our attempts holding it, before that attempt is bumped (signed
	// again with higher fees), or, if none holds it, a no-op fills it. A
	// bump waits StallTimeout again before the next one, unless the node
	// refused it as underpriced (then the next run bumps again).
	StallTimeout time.Duration `flag:"stall-timeout" help:"a wallet whose chain nonce has not moved for this long gets its stalled transaction re-sent with fees raised (max of 1.2x and the node's suggestion), or a no-op for a nonce none of ours holds"`
	// PriceCap caps a bump's fee cap (and tip), in wei; nil or zero: no cap.
	// A bump the cap stops leaves the task as it is and tells the operator
	// (a warn log, the task's PriceCappedAt, OnPriceCapped).
	PriceCap *big.Int `flag:"price-cap" value:"wei-none" help:"the highest fee cap a gas bump may offer, in wei (0: no cap); at the cap the task stays and is marked price_capped_at"`
	// Legacy: transactions are priced by a legacy gas price (type 0, the
	// fee suggestion's base fee plus tip) instead of EIP-1559 fee caps, for
	// chains that do not take type-2 transactions.
	Legacy bool `flag:"legacy" help:"price transactions by a legacy gas price (type 0) instead of EIP-1559 fee caps, for a chain without EIP-1559"`
	// BumpPercent is how much a gas bump raises a stalled transaction's
	// fees, in percent (at least geth's replacement rule's 10).
	BumpPercent int `flag:"bump-percent" help:"how much a gas bump raises a stalled transaction's fee cap and tip, in percent (at least 10, geth's replacement rule); the node's suggestion wins when higher"`
	// MinTip, when set, is the least priority fee per gas a transaction
	// offers, in wei: a node's suggestion below it (an empty chain
	// suggests almost nothing) is raised to it, the fee cap with it.
	MinTip *big.Int `flag:"min-tip" value:"wei-none" help:"the least priority fee per gas a transaction offers, in wei, when the node suggests less (0: the node's suggestion)"`
	// OnPriceCapped, when set, is called once each time a task's bump is
	// first stopped by PriceCap (the hook for webhooks).
	OnPriceCapped func(PriceCapped)
	// ResetGap: a next nonce more than ResetGap above the chain's with
	// nothing in flight is reset to the chain's (recorded on the wallet's
	// health row); 0 means InFlight.
	ResetGap int `flag:"reset-gap" help:"a next nonce more than this above the chain's, with nothing in flight, is reset to the chain's (0: --wallet-in-flight)"`
	// MaxRecycled: with more freed nonces than this, they are filled with
	// no-ops at once rather than left for waiting tasks.
	MaxRecycled int `flag:"max-recycled" help:"with more freed nonces than this, they are filled with no-ops at once instead of waiting for tasks"`
	// BalanceMaxAge is how old the stored balance may be before a send reads
	// it again; sending pauses while it is below the wallet's threshold.
	BalanceMaxAge time.Duration `flag:"balance-max-age" help:"a wallet's balance older than this is read again before sending; sending pauses while it is below the wallet's threshold"`
	// RestoreLookback bounds how many blocks back from the head the lane
	// reads the chain's blocks one by one for the wallet's transactions at
	// nonces its database does not know (a restore from an older backup),
	// when the node cannot find them by the account's nonce at past blocks
	// (a node that is not an archive node). Further back, the wallet is held
	// (wallet_health.recovery_reason) rather than guessed about. 0: never read
	// blocks one by one.
	RestoreLookback uint64 `flag:"restore-lookback" help:"when the chain used nonces the database does not know (restored from an older backup) and the node cannot search past state (not an archive node), read at most this many blocks back from the head for the wallet's transactions; further back the wallet is held (wallet_health.recovery_reason; 0: never read blocks one by one)"`
	// SignParallel is how many signatures of one send are asked of the
	// wallet's signer at once. The nonces are assigned, and for a signer
	// outside the process the requests recorded (the write-ahead across
	// signers), before the first is asked, so the order they come back in
	// changes nothing; a signer with a round trip (an HSM, a KMS, a remote
	// signer) then costs a send one round trip per SignParallel tasks
	// rather than per task.
	SignParallel int `flag:"sign-parallel" help:"signatures of one send asked of the wallet's signer at once (a signer outside the process, an HSM, a KMS or a remote signer, then costs one round trip per this many tasks)"`
	// MaxReplacements is how many times a task whose nonce another
	// transaction took goes back to waiting; once more and it ends in
	// error. 0: a replaced task ends in error at once.
	MaxReplacements int `flag:"max-replacements" help:"times a task whose nonce another transaction took goes back to waiting before it ends in error"`
	// Metrics, when set, counts what keeps wallets moving: the lane
	// "wallet" outcomes bumped, noop, nonce_reset, paused, replaced and
	// reorged.
	Metrics *metrics.Metrics
	// Clock tells the time written to the database; nil is clock.Real.
	Clock clock.Clock
	// Logger gets the lane's logs (never a key); nil discards them.
	Logger *slog.Logger
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

// maxConfirmations bounds Config.Confirmations (a day of 12 s blocks
// is 7200).
const maxConfirmations = 10_000

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
	if c.BumpPercent < 10 || c.BumpPercent > 1000 {
		errs = append(errs, fmt.Errorf("wallet bump percent must be from 10 (geth's replacement rule) to 1000, got %d", c.BumpPercent))
	}
	if c.MinTip != nil && c.MinTip.Sign() < 0 {
		errs = append(errs, fmt.Errorf("wallet min tip must not be negative, got %s", c.MinTip))
	}
	if c.PriceCap != nil && c.PriceCap.Sign() < 0 {
		errs = append(errs, fmt.Errorf("wallet price cap must not be negative, got %s", c.PriceCap))
	}
	if c.SignParallel < 1 {
		errs = append(errs, fmt.Errorf("wallet sign parallel must be at least 1, got %d", c.SignParallel))
	}
	if c.MaxFailures < 1 {
		errs = append(errs, fmt.Errorf("wallet max failures must be at least 1, got %d", c.MaxFailures))
	}
	if c.Confirmations < 0 || c.Confirmations > maxConfirmations {
		errs = append(errs, fmt.Errorf("wallet confirmations must be from 0 (by chain) to %d, got %d", maxConfirmations, c.Confirmations))
	}
	if c.HeadInterval < 0 {
		errs = append(errs, fmt.Errorf("wallet head interval must not be negative, got %s", c.HeadInterval))
	}
	if c.WatchAfter < 0 {
		errs = append(errs, fmt.Errorf("wallet watch-after must not be negative, got %s", c.WatchAfter))
	}
	if c.SendLinger < 0 || c.SendLinger >= c.CycleBudget {
		errs = append(errs, fmt.Errorf("wallet send linger must be from 0 to below the cycle budget (%s), got %s", c.CycleBudget, c.SendLinger))
	}
	errs = append(errs, notPositive(
		setting{"ledger timeout", c.LedgerTimeout}, setting{"database timeout", c.DBTimeout}, setting{"cycle budget", c.CycleBudget},
		setting{"follow interval", c.FollowInterval}, setting{"stall timeout", c.StallTimeout},
		setting{"balance max age", c.BalanceMaxAge}, setting{"rebroadcast after", c.RebroadcastAfter},
		setting{"rewind after", c.RewindAfter})...)
	if c.ReplacedAfter < 0 {
		errs = append(errs, fmt.Errorf("wallet replaced-after must not be negative, got %s", c.ReplacedAfter))
	}
	return errors.Join(errs...)
}

// Defaults is the wallet lane's default configuration: WithDefaults' and,
// in the settings whose zero means something, a 50 ms send linger, the
// chain's head read every 250 ms, an unmoved wallet watched for a minute,
// 50,000 blocks of restore lookback, a minute before a passed nonce counts
// as replaced, 50 recycled nonces and 3 replacements.
func Defaults() Config {
	c := Config{}.WithDefaults()
	c.SendLinger = 50 * time.Millisecond
	c.HeadInterval = 250 * time.Millisecond
	c.WatchAfter = time.Minute
	c.RestoreLookback = 50_000
	c.ReplacedAfter = time.Minute
	c.MaxRecycled = 50
	c.MaxReplacements = 3
	return c
}

// WithDefaults returns c with the lane's defaults in the settings left at
// zero: a budget of 100, the priority queue, 10 s ledger and 5 s database
// timeouts, a 5 s cycle budget, 10 failed runs before a task ends in error,
// 8 signatures asked at once,
// one-second follow passes, a broadcast again after 15 s unmoved, a lower
// head believed after 30 s, a five-minute stall timeout and balance age, the real clock and a
// discarding logger.
//
// A few settings mean something at zero (SendLinger, HeadInterval,
// WatchAfter and RestoreLookback: off; ReplacedAfter: at once; MaxRecycled,
// MaxReplacements: none; ResetGap: InFlight; Confirmations: the chain's
// DefaultConfirmations): WithDefaults leaves them as they are, and
// Defaults sets the first seven to theirs.
func (c Config) WithDefaults() Config {
	c.InFlight = cmp.Or(c.InFlight, 100)
	c.BumpPercent = cmp.Or(c.BumpPercent, 20)
	c.QueueType = cmp.Or(c.QueueType, store.QueuePriority)
	c.LedgerTimeout = cmp.Or(c.LedgerTimeout, 10*time.Second)
	c.DBTimeout = cmp.Or(c.DBTimeout, 5*time.Second)
	c.CycleBudget = cmp.Or(c.CycleBudget, 5*time.Second)
	c.MaxFailures = cmp.Or(c.MaxFailures, 10)
	c.SignParallel = cmp.Or(c.SignParallel, 8)
	c.FollowInterval = cmp.Or(c.FollowInterval, time.Second)
	c.RebroadcastAfter = cmp.Or(c.RebroadcastAfter, 15*time.Second)
	c.RewindAfter = cmp.Or(c.RewindAfter, 30*time.Second)
	c.StallTimeout = cmp.Or(c.StallTimeout, 5*time.Minute)
	c.BalanceMaxAge = cmp.Or(c.BalanceMaxAge, 5*time.Minute)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// DefaultConfirmations is how many blocks deep a transaction must be on
// chainID before its task is done, when Config.Confirmations is 0: 1
// on development chains (geth --dev's 1337, Hardhat's and Anvil's 31337),
// whose blocks come from one node that no one else can reorganize; 64 on
// Polygon PoS (137), whose reorganizations have run that deep; 15 on BNB
// Smart Chain (56); 12 everywhere else (Ethereum mainnet and its test
// networks included: past about a dozen blocks a reorganization of
// proof-of-stake Ethereum has not been seen; the chain's finality comes
// later still).
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

// ConfirmationsOn is the depth a transaction must reach on chainID.
func (c Config) ConfirmationsOn(chainID int64) int {
	if c.Confirmations > 0 {
		return c.Confirmations
	}
	return DefaultConfirmations(chainID)
}

// setting is a duration setting and its name in errors.
type setting struct {
	name string
	v    time.Duration
}

// notPositive returns an error for each setting that is not positive.
func notPositive(settings ...setting) []error {
	var errs []error
	for _, s := range settings {
		if s.v <= 0 {
			errs = append(errs, fmt.Errorf("wallet %s must be positive, got %s", s.name, s.v))
		}
	}
	return errs
}
