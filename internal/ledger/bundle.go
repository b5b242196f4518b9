package ledger

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"golang.org/x/crypto/sha3"
)

// The builder lane (docs/design.md, "The builder lane") hands EVM blocks
// ("bundles") to a JAM chain as work packages. This file is what the lane
// needs from that chain: its timeslots and recent blocks (for anchors),
// work-package submission, and the blocks it produced (for guarantees and
// accumulations).

// Hash is a 32-byte JAM or EVM hash.
type Hash [32]byte

// Hex returns the hash as 0x-prefixed lower-case hex.
func (h Hash) Hex() string { return "0x" + hex.EncodeToString(h[:]) }

// ParseHash reads a 0x-prefixed 64-digit hex hash.
func ParseHash(s string) (Hash, bool) {
	var h Hash
	if len(s) != 66 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(s[2:])); err != nil {
		return h, false
	}
	return h, true
}

// JAM's constants as the builder lane uses them.
const (
	// RecentHistorySize is how many recent blocks a work package may anchor to.
	RecentHistorySize = 8
	// AnchorSafetyMargin: a bundle whose anchor is more than
	// RecentHistorySize - AnchorSafetyMargin slots old at submit time is
	// rebuilt on a fresh anchor first.
	AnchorSafetyMargin = 2
)

// ChainInfo is what a JAM chain says about itself.
type ChainInfo struct {
	// Genesis is the start of slot 0; slot s runs from Genesis + s×SlotLength.
	Genesis time.Time
	// SlotLength is the timeslot length (6 s on JAM; shorter in tests).
	SlotLength time.Duration
	// Cores is the number of cores (at most that many bundles are submitted).
	Cores int
	// Executed is the builder service's last executed EVM block: its number
	// (0 before the first) and hash (the zero hash before the first). A
	// builder with no bundles of its own starts after it.
	Executed BlockRef
}

// Slot returns the timeslot t falls in.
func (c ChainInfo) Slot(t time.Time) uint64 {
	if t.Before(c.Genesis) || c.SlotLength <= 0 {
		return 0
	}
	return uint64(t.Sub(c.Genesis) / c.SlotLength)
}

// SlotStart returns when slot s begins.
func (c ChainInfo) SlotStart(s uint64) time.Time {
	return c.Genesis.Add(time.Duration(s) * c.SlotLength)
}

// BlockRef names a block: a JAM block by timeslot and header hash, or an EVM
// block by number and hash.
type BlockRef struct {
	Number uint64
	Hash   Hash
}

// WorkPackage is one version of a bundle as submitted: EVM block Number
// (whose parent is the block before it), built on Anchor, for Core.
type WorkPackage struct {
	// Number is the EVM block number the bundle is. The chain's builder
	// service executes block numbers strictly in order, each once.
	Number uint64
	// Parent is the hash of EVM block Number-1 as the builder cut it (see
	// BundleHash); the zero hash for the first block.
	Parent Hash
	// Version counts submissions of this bundle (1 is the first); every
	// version has its own work-package hash.
	Version int
	// Core is the core the package is for.
	Core int
	// Anchor is the recent JAM block the package is built on: Number is its
	// timeslot.
	Anchor BlockRef
	// Txs are the signed transactions, in execution order.
	Txs [][]byte
}

// BundleHash is the EVM block's hash: Keccak-256 over its parent, its number
// and its transactions' hashes. It does not depend on the version or the
// anchor: every version of a bundle is the same block.
func BundleHash(parent Hash, number uint64, txHashes []Hash) Hash {
	k := sha3.NewLegacyKeccak256()
	k.Write(parent[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], number)
	k.Write(n[:])
	for _, h := range txHashes {
		k.Write(h[:])
	}
	var out Hash
	k.Sum(out[:0])
	return out
}

// PackageHash is the work-package hash of one version: Keccak-256 over the
// block's hash, the version, the core and the anchor. Versions of one bundle
// differ in it; guarantees and accumulations name it.
func PackageHash(block Hash, version int, core int, anchor BlockRef) Hash {
	k := sha3.NewLegacyKeccak256()
	k.Write(block[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(version))
	k.Write(b[:])
	binary.BigEndian.PutUint64(b[:], uint64(core))
	k.Write(b[:])
	binary.BigEndian.PutUint64(b[:], anchor.Number)
	k.Write(b[:])
	k.Write(anchor.Hash[:])
	var out Hash
	k.Sum(out[:0])
	return out
}

// JAMBlock is one block of the JAM chain, as the builder lane reads it.
type JAMBlock struct {
	// Slot is the block's timeslot; Hash its header hash.
	Slot uint64
	Hash Hash
	// Guarantees (E_G) are the work packages guaranteed in this block.
	Guarantees []Hash
	// Accumulations (E_A) are the work packages accumulated in this block:
	// their EVM block was executed.
	Accumulations []Hash
	// Skipped are the transactions of the packages accumulated in this
	// block that the chain's EVM refused and left out of their EVM block;
	// none when it executed them all (and from a chain that does not say).
	Skipped []SkippedTx
}

// SkippedTx is a transaction of an accumulated work package that the chain
// left out of its EVM block: it was never executed and never will be from
// that block.
type SkippedTx struct {
	// Package is the work package (one of the block's Accumulations).
	Package Hash
	// Tx is the transaction's hash.
	Tx Hash
	// Reason is the chain's reason, geth's error text (for example
	// "insufficient funds for gas * price + value: …").
	Reason string
	// NonceGap says the transaction's nonce was above its sender's next
	// (geth's core.ErrNonceTooHigh): it is valid and may run once the
	// nonces below it have.
	NonceGap bool
}

// BundleLedger is what the builder lane needs from a JAM chain.
type BundleLedger interface {
	// Info reports the chain's slots, cores and the builder service's last
	// executed block.
	Info(ctx context.Context) (ChainInfo, error)
	// RecentBlocks returns up to RecentHistorySize of the newest blocks,
	// oldest first: the anchors a work package may use now.
	RecentBlocks(ctx context.Context) ([]BlockRef, error)
	// SubmitWorkPackage hands one version to the chain's guarantors. A nil
	// error means they took it (a guarantee may follow, or not). Errors are
	// classified: Deterministic for a refused package (G15 AnchorNotRecent,
	// a bad core), Transient when they did not take it, Indeterminate when
	// it is unknown.
	SubmitWorkPackage(ctx context.Context, wp WorkPackage) error
	// Blocks returns the blocks with slot > after, oldest first, at most
	// limit of them. A block is returned only once the chain produced it.
	Blocks(ctx context.Context, after uint64, limit int) ([]JAMBlock, error)
}

// AnchorNotRecent is the reason (and message prefix) of JAM's G15: the
// anchor is not among the recent blocks.
const AnchorNotRecent = "G15 AnchorNotRecent"

// AnchorExpired reports whether a package anchored at anchorSlot can no longer
// be guaranteed in the block of slot: its anchor has left the recent history.
// The chain refuses such a guarantee; the builder relies on it to know that an
// old version will never be executed.
func AnchorExpired(anchorSlot, slot uint64) bool {
	return slot >= anchorSlot+RecentHistorySize
}

// AnchorOffset is the builder lane's dynamic anchor offset: how many slots
// behind the head a bundle with ahead bundles queued before it anchors, so
// later bundles get fresher anchors (8 − 2 − ahead/cores, at least 1).
func AnchorOffset(ahead, cores int) int {
	if cores < 1 {
		cores = 1
	}
	off := RecentHistorySize - AnchorSafetyMargin - ahead/cores
	if off < 1 {
		off = 1
	}
	return off
}

// AnchorStale reports whether a bundle anchored at anchorSlot must be rebuilt
// on a fresh anchor before it is submitted at head slot: its anchor is more
// than RecentHistorySize − AnchorSafetyMargin slots old.
func AnchorStale(anchorSlot, head uint64) bool {
	return head > anchorSlot && head-anchorSlot > RecentHistorySize-AnchorSafetyMargin
}

// PickAnchor returns the recent block offset slots behind the newest one in
// recent (oldest first), or the oldest when there are fewer; false when
// recent is empty.
func PickAnchor(recent []BlockRef, offset int) (BlockRef, bool) {
	if len(recent) == 0 {
		return BlockRef{}, false
	}
	i := len(recent) - 1 - offset
	if i < 0 {
		i = 0
	}
	return recent[i], true
}

// TxHashOf is a signed transaction's hash: Keccak-256 over its binary
// encoding (the RLP of a legacy transaction, the typed envelope otherwise).
func TxHashOf(raw []byte) Hash {
	k := sha3.NewLegacyKeccak256()
	k.Write(raw)
	var out Hash
	k.Sum(out[:0])
	return out
}

// BlockHash is the package's EVM block hash (BundleHash over its
// transactions).
func (wp WorkPackage) BlockHash() Hash {
	hashes := make([]Hash, len(wp.Txs))
	for i, raw := range wp.Txs {
		hashes[i] = TxHashOf(raw)
	}
	return BundleHash(wp.Parent, wp.Number, hashes)
}

// Hash is the package's work-package hash (PackageHash).
func (wp WorkPackage) Hash() Hash {
	return PackageHash(wp.BlockHash(), wp.Version, wp.Core, wp.Anchor)
}

// PoolChain is what the builder lane's pool needs of the chain its
// transactions are for: each sender's nonce in the chain's latest executed
// state, every transaction of an executed bundle counted, none of a bundle
// still in flight (those are the pool's included transactions, which the
// intake counts itself). It is read before the intake's database
// transaction, never inside it; a read that lags is harmless (the pool
// keeps the highest nonce it was told per sender). The JAM chain's client
// (package jam) implements it; ledgertest.PoolChain is one in memory.
type PoolChain interface {
	NonceAt(ctx context.Context, sender Address) (uint64, error)
}

// EVMRPC is the JSON-RPC of the EVM that executes the builder lane's
// bundles, one EVM block per executed bundle: what /rpc reads from the chain
// for its clients (balances, code, calls, gas estimates, fees, blocks and
// receipts). Call returns the result as the node wrote it, or the node's
// JSON-RPC error (package evmrpc's Error, whose code, message and data
// pass to the client), or an error for no answer at all. Package evmrpc
// implements it over HTTP and in-process.
type EVMRPC interface {
	Call(ctx context.Context, method string, params []json.RawMessage) (json.RawMessage, error)
}
