package jam

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"golang.org/x/crypto/sha3"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Defaults for a zero Config field.
const (
	DefaultSlotLength = 6 * time.Second
	DefaultCores      = 2
	DefaultLateSlots  = 4
	// DefaultMaxBlocks is how many of the newest blocks the chain keeps.
	DefaultMaxBlocks = 100_000
	// MaxBlocksPage bounds one Blocks answer.
	MaxBlocksPage = 1000
)

// Reasons of refused packages (Deterministic errors), besides
// ledger.AnchorNotRecent.
const (
	ReasonBadCore = "bad core"
	ReasonNoTxs   = "no transactions"
	ReasonBadTx   = "undecodable transaction"
)

// Answers of simulated faults.
const (
	// ErrTransient is the reason of a submit a simulated fault refused.
	ErrTransient = "simulated transient failure: try again"
	// ErrLostResponse is the reason of a submit taken whose answer a
	// simulated fault lost.
	ErrLostResponse = "simulated lost response: timeout"
)

// Refusal outcomes of the builder service, in Execution.Refused.
const (
	RefusedDuplicate      = "duplicate"
	RefusedParentMismatch = "parent_mismatch"
)

// Config configures a Chain. Zero fields take the defaults named.
type Config struct {
	// Clock tells the chain's time; nil means clock.Real.
	Clock clock.Clock
	// Genesis is the start of slot 0; zero means the clock's now at New.
	Genesis time.Time
	// SlotLength is the timeslot length; 0 means DefaultSlotLength (6 s).
	SlotLength time.Duration `flag:"slot-length" help:"builder lane: the simulated JAM chain's timeslot, for --builder-ledger sim (0: 6s)"`
	// Cores is the number of cores; 0 means DefaultCores (2).
	Cores int
	// Seed seeds every random choice.
	Seed int64
	// NoGuarantee is the fraction of taken packages never guaranteed.
	NoGuarantee float64
	// LateGuarantee is the fraction of taken packages guaranteed only
	// LateSlots slots after their submit slot (if their anchor allows).
	LateGuarantee float64
	// LateSlots is the late guarantee's delay; 0 means DefaultLateSlots (4).
	LateSlots uint64
	// LostResponse is the fraction of submits taken whose caller gets an
	// Indeterminate error.
	LostResponse float64
	// TransientError is the fraction of submits not taken, answered with a
	// Transient error.
	TransientError float64
	// GuaranteeDelaySlots: a taken package is guaranteed in the block this
	// many slots after its submit slot; 0 means 1 (the next block).
	GuaranteeDelaySlots uint64
	// AccumulateDelaySlots: a guaranteed package is accumulated this many
	// slots after its guarantee; 0 means 1.
	AccumulateDelaySlots uint64
	// MaxBlocks is how many of the newest blocks are kept; 0 means
	// DefaultMaxBlocks.
	MaxBlocks int
	// ChainID is the EVM's chain id; 0 means DefaultChainID (1337).
	ChainID int64
	// Alloc funds EVM accounts at genesis, in wei.
	Alloc map[common.Address]*big.Int
	// FundDevAccounts funds each of DevAccounts with DevAccountBalance
	// (10000 ether) at genesis; an Alloc entry for one of them wins.
	FundDevAccounts bool `flag:"fund-dev-accounts" help:"builder lane: the simulated JAM chain's EVM funds the 20 accounts of the development mnemonic \"test test test test test test test test test test test junk\" (m/44'/60'/0'/0/0..19, as hardhat and anvil) with 10000 ether each, for --builder-ledger sim"`
	// Journal is the path of the file every executed package is appended
	// to before its execution is visible; Open replays it. Empty: no
	// journal, the chain starts afresh every time.
	Journal string `flag:"journal" help:"builder lane: a file the simulated JAM chain records what it executed in and replays at start, so that it survives a restart as the database does (empty: kept in memory only), for --builder-ledger sim"`
}

// Execution is one entry of the builder service's log: a package it executed
// (Refused empty) or refused (Refused is RefusedDuplicate or
// RefusedParentMismatch).
type Execution struct {
	Number      uint64 `json:"number"`
	Version     int    `json:"version"`
	PackageHash string `json:"package_hash"`
	// BlockHash is the bundle's hash (ledger.BundleHash): the executed
	// block's name on the JAM side, and its EVM block's extraData.
	BlockHash string `json:"block_hash"`
	// TxHashes are the package's transactions' hashes, in order.
	TxHashes []string `json:"tx_hashes"`
	// Slot is the JAM block the package was accumulated in.
	Slot    uint64 `json:"slot"`
	Refused string `json:"refused,omitempty"`
	// EVMHash is the EVM block's header hash, what eth_getBlockByNumber
	// answers; empty for a refused package.
	EVMHash string `json:"evm_hash,omitempty"`
	// Skipped are the package's transactions the EVM refused, left out of
	// the block.
	Skipped []SkippedTx `json:"skipped,omitempty"`
}

// RefusalCounts counts packages refused at submission, by reason.
type RefusalCounts struct {
	G15     uint64 `json:"g15"`
	BadCore uint64 `json:"bad_core"`
	NoTxs   uint64 `json:"no_txs"`
	BadTx   uint64 `json:"bad_tx"`
}

// FaultCounts counts injected faults, by kind.
type FaultCounts struct {
	Transient     uint64 `json:"transient"`
	LostResponse  uint64 `json:"lost_response"`
	NoGuarantee   uint64 `json:"no_guarantee"`
	LateGuarantee uint64 `json:"late_guarantee"`
}

// Stats counts what the chain has done.
type Stats struct {
	// Head is the newest block's slot.
	Head uint64 `json:"head"`
	// Submitted counts submit calls.
	Submitted uint64 `json:"submitted"`
	// Taken counts packages taken (including those whose answer was lost).
	Taken uint64 `json:"taken"`
	// Resubmitted counts submits of a package already taken (answered
	// success, nothing changed).
	Resubmitted uint64        `json:"resubmitted"`
	Refused     RefusalCounts `json:"refused"`
	Faults      FaultCounts   `json:"faults"`
	// Guaranteed counts guarantees made.
	Guaranteed uint64 `json:"guaranteed"`
	// NeverGuaranteed counts packages whose anchor expired before their
	// guarantee was due.
	NeverGuaranteed uint64 `json:"never_guaranteed"`
	// Executed counts packages the service executed (accumulated).
	Executed uint64 `json:"executed"`
	// Held is how many accumulated packages wait for their predecessor.
	Held uint64 `json:"held"`
	// Duplicates and ParentMismatches count packages the service refused.
	Duplicates       uint64 `json:"duplicates"`
	ParentMismatches uint64 `json:"parent_mismatches"`
	// Skipped counts transactions of executed packages the EVM refused.
	Skipped uint64 `json:"skipped"`
	// NonceGaps counts those of them whose nonce was not their sender's
	// next.
	NonceGaps uint64 `json:"nonce_gaps"`
	// Halted says why the builder service stopped executing (its journal
	// or EVM failed); empty while it runs.
	Halted string `json:"halted,omitempty"`
}

// pkg is a taken work package.
type pkg struct {
	wp       ledger.WorkPackage
	hash     ledger.Hash
	block    ledger.Hash
	txHashes []ledger.Hash
	// txs are wp.Txs decoded, their senders recovered by checkLocked (nil
	// for a package replayed from the journal): execution reuses them.
	txs []*types.Transaction
}

type block struct {
	slot          uint64
	hash          ledger.Hash
	guarantees    []ledger.Hash
	accumulations []ledger.Hash
	// skipped are the transactions the EVM left out of the blocks of the
	// accumulated packages.
	skipped []ledger.SkippedTx
}

// Chain is the simulated JAM chain. It is safe for concurrent use.
type Chain struct {
	cfg   Config
	clock clock.Clock
	info  ledger.ChainInfo

	mu     sync.Mutex
	rng    *rand.Rand
	blocks []block // consecutive slots, blocks[0].slot is the oldest kept
	taken  map[ledger.Hash]bool
	// guaranteeAt and accumulateAt are the packages due in a slot's block,
	// in the order they became due.
	guaranteeAt  map[uint64][]*pkg
	accumulateAt map[uint64][]*pkg
	held         map[uint64][]*pkg // by EVM number, waiting for its predecessor
	executed     ledger.BlockRef
	executions   []Execution
	refusals     []Execution
	stats        Stats
	// halted, once set, stops executions: a package is held instead.
	halted  error
	evm     *evmChain
	journal *journal // nil without Config.Journal
	rpc     http.Handler
}

var _ ledger.BundleLedger = (*Chain)(nil)

// New is Open for a chain without a Journal, which opens unless go-ethereum
// refuses its genesis: New panics then.
func New(cfg Config) *Chain {
	c, err := Open(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

// Open returns a chain holding its genesis block (and every block whose
// slot has begun by the clock). With a Journal it first replays the
// journal's packages into the EVM and continues from the last: same genesis
// time (so slots and JAM block hashes continue), same executed block, same
// EVM blocks, balances and receipts. Close releases it.
func Open(cfg Config) (*Chain, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	var (
		j       *journal
		hdr     *journalHeader
		entries []journalEntry
		err     error
	)
	if cfg.Journal != "" {
		if j, hdr, entries, err = openJournal(cfg.Journal); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Chain, error) {
		if j != nil {
			_ = j.close()
		}
		return nil, err
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = DefaultChainID
	}
	if cfg.ChainID < 0 {
		return fail(fmt.Errorf("jam: chain id %d is negative", cfg.ChainID))
	}
	if hdr != nil {
		switch {
		case !cfg.Genesis.IsZero() && !cfg.Genesis.Equal(hdr.Genesis):
			return fail(fmt.Errorf("jam: journal %s has genesis %s, the configuration %s", cfg.Journal, hdr.Genesis, cfg.Genesis))
		case hdr.ChainID != cfg.ChainID:
			return fail(fmt.Errorf("jam: journal %s has chain id %d, the configuration %d", cfg.Journal, hdr.ChainID, cfg.ChainID))
		}
		cfg.Genesis = hdr.Genesis
	}
	if cfg.Genesis.IsZero() {
		cfg.Genesis = cfg.Clock.Now()
	}
	if cfg.SlotLength <= 0 {
		cfg.SlotLength = DefaultSlotLength
	}
	if cfg.Cores <= 0 {
		cfg.Cores = DefaultCores
	}
	if cfg.LateSlots == 0 {
		cfg.LateSlots = DefaultLateSlots
	}
	if cfg.GuaranteeDelaySlots == 0 {
		cfg.GuaranteeDelaySlots = 1
	}
	if cfg.AccumulateDelaySlots == 0 {
		cfg.AccumulateDelaySlots = 1
	}
	if cfg.MaxBlocks <= 0 {
		cfg.MaxBlocks = DefaultMaxBlocks
	}
	cfg.MaxBlocks = max(cfg.MaxBlocks, ledger.RecentHistorySize)
	cfg.NoGuarantee = ledger.ClampRate(cfg.NoGuarantee)
	cfg.LateGuarantee = ledger.ClampRate(cfg.LateGuarantee)
	cfg.LostResponse = ledger.ClampRate(cfg.LostResponse)
	cfg.TransientError = ledger.ClampRate(cfg.TransientError)
	evm, err := newEVMChain(cfg.ChainID, genesisAlloc(cfg), uint64(max(0, cfg.Genesis.Unix())))
	if err != nil {
		return fail(err)
	}
	c := &Chain{
		cfg:   cfg,
		clock: cfg.Clock,
		info:  ledger.ChainInfo{Genesis: cfg.Genesis, SlotLength: cfg.SlotLength, Cores: cfg.Cores},
		// PCG wants two words; the second is a fixed odd constant ("jamsim").
		rng:          rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6a616d73696d)),
		taken:        map[ledger.Hash]bool{},
		guaranteeAt:  map[uint64][]*pkg{},
		accumulateAt: map[uint64][]*pkg{},
		held:         map[uint64][]*pkg{},
		evm:          evm,
		journal:      j,
	}
	c.rpc = newEVMServer(c)
	if j != nil {
		if err := c.replay(hdr, entries); err != nil {
			evm.close()
			return fail(err)
		}
	}
	c.blocks = []block{{slot: 0, hash: blockHash(ledger.Hash{}, 0)}}
	c.mu.Lock()
	c.advanceLocked()
	c.mu.Unlock()
	return c, nil
}

// genesisAlloc is Alloc with, under FundDevAccounts, the dev accounts.
func genesisAlloc(cfg Config) map[common.Address]*big.Int {
	out := map[common.Address]*big.Int{}
	if cfg.FundDevAccounts {
		balance, _ := new(big.Int).SetString(DevAccountBalance, 10)
		for _, a := range DevAccounts() {
			out[a.Address] = balance
		}
	}
	for a, wei := range cfg.Alloc {
		out[a] = wei
	}
	return out
}

// replay writes a new journal's header, or executes an existing journal's
// packages again, checking that they build the blocks they built.
func (c *Chain) replay(hdr *journalHeader, entries []journalEntry) error {
	genesis := c.evm.genesisHash()
	if hdr == nil {
		return c.journal.append(journalHeader{Genesis: c.cfg.Genesis, ChainID: c.cfg.ChainID, EVMGenesis: genesis})
	}
	if hdr.EVMGenesis != genesis {
		return fmt.Errorf("jam: journal %s was written for EVM genesis %s, this chain's is %s (another alloc?)",
			c.cfg.Journal, hdr.EVMGenesis.Hex(), genesis.Hex())
	}
	for _, e := range entries {
		p := &pkg{wp: ledger.WorkPackage{Number: e.Number, Parent: ledger.Hash(e.Parent), Version: e.Version}}
		for _, raw := range e.Txs {
			p.wp.Txs = append(p.wp.Txs, raw)
			p.txHashes = append(p.txHashes, ledger.Hash(crypto.Keccak256Hash(raw)))
		}
		p.block = ledger.BundleHash(p.wp.Parent, p.wp.Number, p.txHashes)
		p.hash = ledger.Hash(e.PackageHash)
		switch {
		case e.Number != c.executed.Number+1 || p.wp.Parent != c.executed.Hash:
			return fmt.Errorf("jam: journal %s: block %d on %s does not follow block %d %s",
				c.cfg.Journal, e.Number, e.Parent.Hex(), c.executed.Number, c.executed.Hash.Hex())
		case p.block != ledger.Hash(e.Hash):
			return fmt.Errorf("jam: journal %s: block %d's transactions hash to %s, not %s", c.cfg.Journal, e.Number, p.block.Hex(), e.Hash.Hex())
		}
		ex, err := c.executeEVM(p, e.Slot, e.Time, nil)
		if err != nil {
			return err
		}
		if ex.EVMHash != e.EVMHash.Hex() {
			return fmt.Errorf("jam: journal %s: block %d built EVM block %s again, not %s", c.cfg.Journal, e.Number, ex.EVMHash, e.EVMHash.Hex())
		}
	}
	return nil
}

// Close stops the EVM and closes the journal; the chain is not used after.
func (c *Chain) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evm.close()
	if c.halted == nil {
		c.halted = errors.New("jam: chain closed")
	}
	if c.journal == nil {
		return nil
	}
	err := c.journal.close()
	c.journal = nil
	return err
}

// Info reports the chain's slots, cores and the last executed EVM block.
func (c *Chain) Info(ctx context.Context) (ledger.ChainInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	info := c.info
	info.Executed = c.executed
	return info, nil
}

// RecentBlocks returns the RecentHistorySize newest blocks, oldest first.
func (c *Chain) RecentBlocks(ctx context.Context) ([]ledger.BlockRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return c.recentLocked(), nil
}

func (c *Chain) recentLocked() []ledger.BlockRef {
	start := max(0, len(c.blocks)-ledger.RecentHistorySize)
	out := make([]ledger.BlockRef, 0, len(c.blocks)-start)
	for _, b := range c.blocks[start:] {
		out = append(out, ledger.BlockRef{Number: b.slot, Hash: b.hash})
	}
	return out
}

// Blocks returns the produced blocks with slot > after, oldest first, at most
// limit of them (limit ≤ 0 or above MaxBlocksPage means MaxBlocksPage).
// Blocks older than the kept history are gone: the answer then starts at the
// oldest kept block.
func (c *Chain) Blocks(ctx context.Context, after uint64, limit int) ([]ledger.JAMBlock, error) {
	if limit <= 0 || limit > MaxBlocksPage {
		limit = MaxBlocksPage
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	first := c.blocks[0].slot
	start := 0
	if after >= first {
		if after-first+1 >= uint64(len(c.blocks)) {
			return []ledger.JAMBlock{}, nil
		}
		start = int(after - first + 1)
	}
	end := min(len(c.blocks), start+limit)
	out := make([]ledger.JAMBlock, 0, end-start)
	for _, b := range c.blocks[start:end] {
		out = append(out, ledger.JAMBlock{
			Slot: b.slot, Hash: b.hash,
			Guarantees:    append([]ledger.Hash(nil), b.guarantees...),
			Accumulations: append([]ledger.Hash(nil), b.accumulations...),
			Skipped:       append([]ledger.SkippedTx(nil), b.skipped...),
		})
	}
	return out, nil
}

// SubmitWorkPackage hands wp to the guarantors. See the package doc for the
// rules and faults.
func (c *Chain) SubmitWorkPackage(ctx context.Context, wp ledger.WorkPackage) error {
	_, lost, err := c.submit(wp)
	if err != nil {
		return err
	}
	if lost {
		return ledger.NewError(ledger.Indeterminate, ErrLostResponse, context.DeadlineExceeded)
	}
	return nil
}

// submit is SubmitWorkPackage with the lost-response fault apart, so that the
// HTTP handler can lose the answer on the wire. It returns the package hash
// of a taken package.
func (c *Chain) submit(wp ledger.WorkPackage) (ledger.Hash, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	c.stats.Submitted++
	// Every fault is drawn on every call, so that one rate does not shift
	// the others' draws.
	transient := c.chance(c.cfg.TransientError)
	lost := c.chance(c.cfg.LostResponse)
	noGuarantee := c.chance(c.cfg.NoGuarantee)
	late := c.chance(c.cfg.LateGuarantee)
	if transient {
		c.stats.Faults.Transient++
		return ledger.Hash{}, false, ledger.NewError(ledger.Transient, ErrTransient, nil)
	}
	p, err := c.checkLocked(wp)
	if err != nil {
		return ledger.Hash{}, false, err
	}
	if c.taken[p.hash] {
		c.stats.Resubmitted++
		return p.hash, false, nil
	}
	c.taken[p.hash] = true
	c.stats.Taken++
	if lost {
		c.stats.Faults.LostResponse++
	}
	head := c.headLocked()
	switch {
	case noGuarantee:
		c.stats.Faults.NoGuarantee++
	case late:
		c.stats.Faults.LateGuarantee++
		c.guaranteeAt[head+c.cfg.LateSlots] = append(c.guaranteeAt[head+c.cfg.LateSlots], p)
	default:
		due := head + c.cfg.GuaranteeDelaySlots
		c.guaranteeAt[due] = append(c.guaranteeAt[due], p)
	}
	return p.hash, lost, nil
}

// checkLocked refuses what the guarantors would refuse and builds the taken
// package.
func (c *Chain) checkLocked(wp ledger.WorkPackage) (*pkg, error) {
	if wp.Core < 0 || wp.Core >= c.cfg.Cores {
		c.stats.Refused.BadCore++
		return nil, ledger.NewError(ledger.Deterministic, ReasonBadCore,
			fmt.Errorf("core %d is not in [0, %d)", wp.Core, c.cfg.Cores))
	}
	if len(wp.Txs) == 0 {
		c.stats.Refused.NoTxs++
		return nil, ledger.NewError(ledger.Deterministic, ReasonNoTxs,
			fmt.Errorf("work package for EVM block %d has no transactions", wp.Number))
	}
	if !c.isRecentLocked(wp.Anchor) {
		c.stats.Refused.G15++
		recent := c.recentLocked()
		return nil, ledger.NewError(ledger.Deterministic, ledger.AnchorNotRecent,
			fmt.Errorf("anchor slot %d hash %s is not among the recent blocks (slots %d to %d)",
				wp.Anchor.Number, wp.Anchor.Hash.Hex(), recent[0].Number, recent[len(recent)-1].Number))
	}
	p := &pkg{wp: wp}
	p.wp.Txs = make([][]byte, len(wp.Txs))
	p.txs = make([]*types.Transaction, len(wp.Txs))
	for i, raw := range wp.Txs {
		tx := new(types.Transaction)
		if err := tx.UnmarshalBinary(raw); err != nil {
			c.stats.Refused.BadTx++
			return nil, ledger.NewError(ledger.Deterministic, ReasonBadTx, fmt.Errorf("transaction %d: %w", i, err))
		}
		if _, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx); err != nil {
			c.stats.Refused.BadTx++
			return nil, ledger.NewError(ledger.Deterministic, ReasonBadTx, fmt.Errorf("transaction %d: recovering its sender: %w", i, err))
		}
		p.wp.Txs[i] = append([]byte(nil), raw...)
		p.txs[i] = tx
		p.txHashes = append(p.txHashes, ledger.Hash(tx.Hash()))
	}
	p.block = ledger.BundleHash(wp.Parent, wp.Number, p.txHashes)
	p.hash = ledger.PackageHash(p.block, wp.Version, wp.Core, wp.Anchor)
	return p, nil
}

// isRecentLocked is G15: the anchor is one of the recent blocks, by slot and
// hash.
func (c *Chain) isRecentLocked(a ledger.BlockRef) bool {
	for _, r := range c.recentLocked() {
		if r == a {
			return true
		}
	}
	return false
}

// Executions returns the builder service's executions, in order.
func (c *Chain) Executions() []Execution {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return cloneLog(c.executions)
}

// Refusals returns the packages the builder service refused (duplicates,
// parent mismatches), in order.
func (c *Chain) Refusals() []Execution {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return cloneLog(c.refusals)
}

// NonceAt is sender's account nonce in the builder service's EVM state after
// the last executed block (0 before its first transaction). It is what the
// builder's pool reads as the chain's nonce (ledger.PoolChain).
func (c *Chain) NonceAt(ctx context.Context, sender ledger.Address) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.advance()
	n, err := c.evm.nonce(common.Address(sender))
	if err != nil {
		return 0, ledger.NewError(ledger.Transient, "reading the EVM state", err)
	}
	return n, nil
}

// advance produces the blocks whose slot has begun, and with them every due
// execution. EVM reads call it and then read without the mutex.
func (c *Chain) advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
}

// Stats returns the counters.
func (c *Chain) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	s := c.stats
	s.Head = c.headLocked()
	if c.halted != nil {
		s.Halted = c.halted.Error()
	}
	for _, q := range c.held {
		s.Held += uint64(len(q))
	}
	return s
}

func cloneLog(log []Execution) []Execution {
	out := make([]Execution, len(log))
	for i, e := range log {
		e.TxHashes = append([]string(nil), e.TxHashes...)
		e.Skipped = append([]SkippedTx(nil), e.Skipped...)
		out[i] = e
	}
	return out
}

func (c *Chain) headLocked() uint64 { return c.blocks[len(c.blocks)-1].slot }

// advanceLocked produces every block whose slot has begun by the clock.
func (c *Chain) advanceLocked() {
	now := c.info.Slot(c.clock.Now())
	for s := c.headLocked() + 1; s <= now; s++ {
		c.produceLocked(s)
	}
	if n := len(c.blocks); n >= 2*c.cfg.MaxBlocks {
		// Trim in one copy every MaxBlocks blocks rather than on every block.
		k := copy(c.blocks, c.blocks[n-c.cfg.MaxBlocks:])
		clear(c.blocks[k:])
		c.blocks = c.blocks[:k]
	}
}

// produceLocked makes the block of slot s: its guarantees, then its
// accumulations.
func (c *Chain) produceLocked(s uint64) {
	b := block{slot: s, hash: blockHash(c.blocks[len(c.blocks)-1].hash, s)}
	for _, p := range c.guaranteeAt[s] {
		// The chain refuses a guarantee whose anchor left the recent
		// history: the builder relies on it to know an old version is dead.
		if ledger.AnchorExpired(p.wp.Anchor.Number, s) {
			c.stats.NeverGuaranteed++
			continue
		}
		c.stats.Guaranteed++
		b.guarantees = append(b.guarantees, p.hash)
		due := s + c.cfg.AccumulateDelaySlots
		c.accumulateAt[due] = append(c.accumulateAt[due], p)
	}
	delete(c.guaranteeAt, s)
	c.blocks = append(c.blocks, b)
	for _, p := range c.accumulateAt[s] {
		c.accumulateLocked(p, s)
	}
	delete(c.accumulateAt, s)
}

// accumulateLocked offers p to the builder service in the block of slot s,
// then executes, in the same block, every held package whose turn came.
func (c *Chain) accumulateLocked(p *pkg, s uint64) {
	c.offerLocked(p, s)
	for c.halted == nil {
		next := c.executed.Number + 1
		q := c.held[next]
		if len(q) == 0 {
			return
		}
		delete(c.held, next)
		// Each is next or, once one of them executed, a duplicate: none is
		// held again, so the loop ends.
		for _, h := range q {
			c.offerLocked(h, s)
		}
	}
}

// offerLocked is the service's rule: EVM blocks execute strictly in number
// order, each once, on the executed parent.
func (c *Chain) offerLocked(p *pkg, s uint64) {
	switch next := c.executed.Number + 1; {
	case p.wp.Number > next || c.halted != nil:
		c.held[p.wp.Number] = append(c.held[p.wp.Number], p)
	case p.wp.Number < next:
		c.stats.Duplicates++
		c.refusals = append(c.refusals, c.entry(p, s, RefusedDuplicate))
	case p.wp.Parent != c.executed.Hash:
		c.stats.ParentMismatches++
		c.refusals = append(c.refusals, c.entry(p, s, RefusedParentMismatch))
	default:
		c.executeLocked(p, s)
	}
}

// executeLocked runs p as the next EVM block, dated slot s's start. A
// journal or EVM failure halts the service with p held: nothing after it may
// execute.
func (c *Chain) executeLocked(p *pkg, s uint64) {
	start := c.cfg.Genesis.Add(time.Duration(s) * c.cfg.SlotLength).Unix()
	ex, err := c.executeEVM(p, s, uint64(max(0, start)), c.journal)
	if err != nil {
		c.halted = err
		c.held[p.wp.Number] = append(c.held[p.wp.Number], p)
		return
	}
	last := &c.blocks[len(c.blocks)-1]
	last.accumulations = append(last.accumulations, p.hash)
	for _, sk := range ex.Skipped {
		h, _ := ledger.ParseHash(sk.Hash)
		last.skipped = append(last.skipped, ledger.SkippedTx{Package: p.hash, Tx: h, Reason: sk.Reason, NonceGap: sk.NonceGap})
	}
}

// executeEVM builds p's EVM block, appends it to j (when not nil), makes it
// the EVM's head and the executed block, and logs it. The caller holds mu
// or has the chain to itself.
func (c *Chain) executeEVM(p *pkg, s, blockTime uint64, j *journal) (Execution, error) {
	b, skipped, gaps, err := c.evm.build(p.block, blockTime, p.wp.Txs, p.txs)
	if err != nil {
		return Execution{}, err
	}
	if j != nil {
		e := journalEntry{
			Number: p.wp.Number, Hash: common.Hash(p.block), Parent: common.Hash(p.wp.Parent), Version: p.wp.Version,
			PackageHash: common.Hash(p.hash), Slot: s, Time: b.Time(), EVMHash: b.Hash(),
		}
		for _, raw := range p.wp.Txs {
			e.Txs = append(e.Txs, raw)
		}
		if err := j.append(e); err != nil {
			return Execution{}, err
		}
	}
	if err := c.evm.insert(b); err != nil {
		return Execution{}, err
	}
	c.executed = ledger.BlockRef{Number: p.wp.Number, Hash: p.block}
	c.stats.Executed++
	c.stats.Skipped += uint64(len(skipped))
	c.stats.NonceGaps += uint64(gaps)
	ex := c.entry(p, s, "")
	ex.EVMHash, ex.Skipped = b.Hash().Hex(), skipped
	c.executions = append(c.executions, ex)
	return ex, nil
}

func (c *Chain) entry(p *pkg, s uint64, refused string) Execution {
	e := Execution{
		Number: p.wp.Number, Version: p.wp.Version, PackageHash: p.hash.Hex(), BlockHash: p.block.Hex(),
		TxHashes: make([]string, len(p.txHashes)), Slot: s, Refused: refused,
	}
	for i, h := range p.txHashes {
		e.TxHashes[i] = h.Hex()
	}
	return e
}

// chance draws from the seeded source. The caller holds mu.
func (c *Chain) chance(rate float64) bool {
	return c.rng.Float64() < rate
}

// blockHash is a JAM header hash: Keccak-256 over the parent's hash and the
// slot.
func blockHash(parent ledger.Hash, slot uint64) ledger.Hash {
	k := sha3.NewLegacyKeccak256()
	k.Write(parent[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], slot)
	k.Write(b[:])
	var out ledger.Hash
	k.Sum(out[:0])
	return out
}
