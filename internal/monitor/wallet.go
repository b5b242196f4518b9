package monitor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// WalletConfirmer is the wallet lane's monitor: the confirm step of a
// wallet's run (wallet.Job), once per run. It follows the chain the
// way a production transaction manager does: receipts are not final until
// they are deep enough, blocks can leave the chain, and a node's answers can
// lag or be stale. It remembers, per wallet, since when each attempt's nonce
// has been taken by another transaction and when its chain nonce last moved.
type WalletConfirmer struct {
	cfg    wallet.Config
	store  *store.Store
	ledger ledger.WalletLedger

	mu sync.Mutex
	// absent holds, per shard key, when each sent attempt (by hash) was
	// first seen taken by another transaction in the chain's blocks.
	absent map[string]map[string]time.Time
	// watch holds, per shard key, what the wallet's last confirm saw of the
	// chain's nonce.
	watch map[string]*chainWatch
}

var _ wallet.Step = (*WalletConfirmer)(nil)

// NewWalletConfirmer returns the confirm step of the wallets on led; one per
// process. cfg gets its defaults (wallet.Config.WithDefaults).
func NewWalletConfirmer(st *store.Store, led ledger.WalletLedger, cfg wallet.Config) (*WalletConfirmer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil || led == nil {
		return nil, errors.New("wallet confirmer: it needs a store and a ledger")
	}
	return &WalletConfirmer{cfg: cfg, store: st, ledger: led, absent: map[string]map[string]time.Time{}, watch: map[string]*chainWatch{}}, nil
}

// Collect returns the run's confirm cycle.
func (m *WalletConfirmer) Collect(_ context.Context, s *wallet.Shard) (workers.Cycle, error) {
	return &confirmCycle{Shard: s, m: m}, nil
}

// confirmCycle is a wallet's confirm, run once per run, made to follow a
// chain that can take blocks back, through nodes that can lag behind it. It
// reads the chain's nonce and head; a head below the best this process has
// seen is a lagging node's (wallet.Shard.ObserveHead) and the cycle decides
// and records nothing; a nonce below one already read, with the head not
// gone back, is a lagging node's too and the higher one is used
// (wallet.Shard.TrustChainNonce). Then:
//
//  1. mined or confirmed attempts at or above the chain's nonce as read may have
//     left the chain (a reorg, a node that lost blocks or was restored from
//     an older state): unless a receipt still says otherwise, and only when
//     the chain shows their block gone (leftChain: another block at its
//     height, or a settled head below it — never a missing receipt or a
//     missing block alone, which is what a lagging node answers), each goes
//     back to sent (its task executing again) and its same bytes are
//     broadcast again — its nonce is never signed with other content while
//     it may still land;
//  2. mined attempts below it are checked again: a receipt in a block the
//     chain still has counts its confirmations, and at wallet.Config.Confirmations
//     the task is done; a receipt gone, or in a block the chain replaced,
//     sends the attempt back to sent as in 1, on the same evidence (unless
//     another hash of the nonce was the one mined);
//  3. sent attempts it passed get their receipts looked up (every hash of
//     the nonce): mined, or done at once when already deep enough;
//  4. sent attempts from the chain's nonce on are broadcast again with the
//     same bytes when their last broadcast was indeterminate, when 1 or 2
//     found the chain had lost blocks, or when the chain's nonce has not
//     moved for wallet.Config.RebroadcastAfter (a node that lost its pool).
type confirmCycle struct {
	*wallet.Shard
	m     *WalletConfirmer
	depth int
	// chainNonce is the chain's nonce the cycle acts on; readNonce the one
	// read, lower when a lagging node answered it.
	chainNonce, readNonce uint64
	head                  ledger.BlockRef
	// lagging: the head read was behind the best head seen: the cycle
	// decides nothing and records nothing.
	lagging bool
	// blocks caches the chain's block by number for this cycle (a zero
	// hash: no block there), and atNonce the wallet's transactions the
	// chain's blocks hold by nonce.
	blocks  map[uint64]ledger.Hash
	atNonce map[uint64]ledger.NonceTx
	// receipts are the answers of prefetch, by hash: receipts read
	// concurrently before a step looks its attempts up one by one.
	receipts map[string]ledger.Receipt

	// reopened: mined or confirmed attempts whose transaction left the
	// chain, with why.
	reopened []reopened
	// confirmed: attempts with a receipt, mined or final (the task is done).
	confirmed []wallet.Result
	// replaced: attempts passed by the chain whose hashes have had no
	// receipt for wallet.Config.ReplacedAfter.
	replaced []wallet.Result
	// forgotten: sent attempts whose nonce the chain's blocks show taken by
	// a transaction of the wallet that sends the same (a gas bump the
	// database forgot): it is stored as the attempt's bump and recorded
	// mined, and the task is not sent again.
	forgotten []forgottenBump
	// resent: outcomes of the new broadcasts.
	resent []wallet.Result
	// mined are the receipts record turned into results, by hash (their
	// logs are recorded with the task done: taskOutcomes).
	mined map[string]ledger.Receipt
	// reverts are the decoded reverts of the tasks about to end done with a
	// reverted receipt, by task id (replayReverts).
	reverts map[string]json.RawMessage
	// rebroadcast: the cycle broadcast every sent attempt from the chain's
	// nonce on (Commit remembers when).
	rebroadcast bool
}

// forgottenBump is a sent attempt and the transaction of the wallet with
// the same recipient, value and data that took its nonce.
type forgottenBump struct {
	Attempt store.Attempt
	Tx      ledger.NonceTx
}

// reopened is an attempt whose mined transaction is no longer on the chain.
type reopened struct {
	Attempt store.Attempt
	Reason  string
}

// chainWatch is what a Job remembers of a wallet's chain between runs.
type chainWatch struct {
	// nonce is the chain's nonce as last read, since when it has not moved.
	nonce uint64
	since time.Time
	// rebroadcastAt is when the sent attempts were last broadcast again
	// because the nonce did not move.
	rebroadcastAt time.Time
}

// Execute reads the chain; it writes nothing but broadcasts stored bytes.
func (c *confirmCycle) Execute(ctx context.Context) error {
	if err := c.CheckChain(ctx); err != nil {
		return err
	}
	c.depth = c.m.cfg.ConfirmationsOn(c.ChainID())
	c.blocks = map[uint64]ledger.Hash{}
	c.atNonce = map[uint64]ledger.NonceTx{}
	c.receipts = map[string]ledger.Receipt{}
	n, err := c.ReadChainNonce(ctx)
	if err != nil {
		return err
	}
	c.head, err = wallet.LedgerCall(ctx, c.Shard, c.m.ledger.HeadBlock)
	if err != nil {
		return fmt.Errorf("reading the chain's head for %s: %w", c.Claim.Key, err)
	}
	if c.lagging = c.ObserveHead(c.head.Number); c.lagging {
		return nil // the next run asks again
	}
	c.readNonce = n
	var lagging bool
	if c.chainNonce, lagging = c.TrustChainNonce(n, c.head.Number); lagging {
		c.m.cfg.Logger.Debug("wallet: the chain's nonce read below one already read, with the head not gone back: a lagging node's, not believed",
			"shard", c.Claim.Key, "read", n, "chain_nonce", c.chainNonce, "head", c.head.Number)
	}
	c.blocks[c.head.Number] = c.head.Hash
	b := c.Budget()
	if err := c.checkMinedFrom(ctx, b); err != nil {
		return err
	}
	if err := c.checkMined(ctx, b); err != nil {
		return err
	}
	if err := c.lookUpReceipts(ctx, b); err != nil {
		return err
	}
	c.replayReverts(ctx, b)
	return c.broadcastAgain(ctx)
}

// canonical reports whether the chain's block at r's number is r's block.
// A failed read counts as unknown (ok false), and so does no block at that
// number: a node behind the one that answered the receipt.
func (c *confirmCycle) canonical(ctx context.Context, r ledger.Receipt) (canonical, ok bool) {
	h, found, ok := c.blockAt(ctx, r.BlockNumber)
	if !ok || !found {
		return false, false
	}
	return h == r.BlockHash, true
}

// blockAt is the hash of the chain's block at number (found false: none
// there), from one read per block number and cycle; ok is false when the
// read failed.
func (c *confirmCycle) blockAt(ctx context.Context, number uint64) (hash ledger.Hash, found, ok bool) {
	if h, known := c.blocks[number]; known {
		return h, h != ledger.Hash{}, true
	}
	type lookup struct {
		blk   ledger.BlockRef
		found bool
	}
	got, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (lookup, error) {
		blk, found, err := c.m.ledger.BlockAt(ctx, number)
		return lookup{blk, found}, err
	})
	if err != nil {
		c.m.cfg.Logger.Debug("wallet: block lookup failed, asking again later", "shard", c.Claim.Key, "block", number, "error", err)
		return ledger.Hash{}, false, false
	}
	if got.found {
		hash = got.blk.Hash
	}
	c.blocks[number] = hash
	return hash, got.found, true
}

// leftChain reports why a's mined transaction left the chain, when the
// chain shows it: the chain's block at the height a's receipt named has
// another hash, or the head, settled (the best this process has seen for
// wallet.Config.RewindAfter), is below that height. A missing receipt, or a
// missing block at or below the head, is never enough: a node behind the
// others answers both for a transaction the chain still holds. Called only
// in a cycle whose head read was not lagging.
func (c *confirmCycle) leftChain(ctx context.Context, a store.Attempt) (string, bool) {
	if a.MinedBlock == nil || a.MinedBlockHash == "" {
		return "", false
	}
	n := uint64(*a.MinedBlock)
	h, found, ok := c.blockAt(ctx, n)
	switch {
	case !ok:
		return "", false
	case found && !strings.EqualFold(h.Hex(), a.MinedBlockHash):
		return fmt.Sprintf("left the chain: block %d is now %s, not %s, and no hash of nonce %d has a receipt in a block the chain has",
			n, h.Hex(), a.MinedBlockHash, a.Nonce), true
	case !found && n > c.head.Number && c.HeadSettled(c.head.Number):
		return fmt.Sprintf("left the chain: the chain went back to block %d, below its block %d, and no hash of nonce %d has a receipt in a block the chain has",
			c.head.Number, n, a.Nonce), true
	}
	return "", false
}

// final reports whether a receipt in block number is wallet.Config.Confirmations
// deep by the cycle's head.
func (c *confirmCycle) final(number uint64) bool {
	return finalAt(c.depth, c.head.Number, number)
}

// finalAt reports whether a receipt in block number is depth blocks deep
// by head (its own block counts; a depth of 1 or less is final at once).
func finalAt(depth int, head, number uint64) bool {
	return depth <= 1 || head >= number && head-number+1 >= uint64(depth)
}

// found is a receipt of one of the hashes of a nonce, in a block the chain
// has.
type found struct {
	hash    string
	receipt ledger.Receipt
}

// onChain is what the chain says of an attempt's nonce.
type onChain struct {
	// ok: one of our hashes of the nonce is mined, in a block the chain has.
	ok    bool
	found found
	// other: the chain's blocks hold another transaction at the nonce.
	other *ledger.NonceTx
	// ours: other sends what a's transaction sends (recipient, value,
	// data), signed by the wallet's key: a gas bump of a's that the
	// database forgot (restored from a backup older than the bump).
	ours bool
	// failed: a lookup failed and nothing was found: ask again later.
	failed bool
}

// lookUp asks the chain about a's nonce: first the receipts of every hash of
// the nonce (the node's index by hash), each checked against the block the
// chain has at its number; then, when none is found and the chain's nonce
// has passed a's, the chain's blocks themselves (TxsAtNonce): a node that
// lost blocks may keep index entries of transactions it has mined again
// elsewhere, or of none, so "no receipt" alone is never "another
// transaction took the nonce".
func (c *confirmCycle) lookUp(ctx context.Context, a store.Attempt) onChain {
	// The attempt's own hash first: when it has a receipt in a block the
	// chain has, it is the nonce's one mined transaction, and its bumps
	// need not be read (a nonce is mined once).
	if rc, ok := c.receipts[a.TxHash]; ok && rc.Found {
		if canonical, known := c.canonical(ctx, rc); known && canonical {
			return onChain{ok: true, found: found{hash: a.TxHash, receipt: rc}}
		}
	}
	hashes, err := c.HashesOfNonce(ctx, a)
	if err != nil {
		return onChain{failed: true}
	}
	var out onChain
	for _, h := range hashes {
		rc, err := c.receipt(ctx, h)
		if err != nil {
			out.failed = true
			continue
		}
		if !rc.Found {
			continue
		}
		canonical, known := c.canonical(ctx, rc)
		switch {
		case !known:
			out.failed = true
		case canonical:
			return onChain{ok: true, found: found{hash: h, receipt: rc}}
		default:
			c.m.cfg.Logger.Debug("wallet: a receipt in a block the chain no longer has", "shard", c.Claim.Key, "tx_hash", h,
				"block", rc.BlockNumber, "block_hash", rc.BlockHash.Hex(), "chain_block_hash", c.blocks[rc.BlockNumber].Hex())
		}
	}
	if uint64(a.Nonce) >= c.chainNonce {
		return out // not passed: no block holds it
	}
	tx, ok := c.txAtNonce(ctx, uint64(a.Nonce))
	switch {
	case !ok:
		return onChain{failed: true}
	case slices.Contains(hashes, tx.Hash.Hex()):
		return onChain{ok: true, found: found{hash: tx.Hash.Hex(), receipt: tx.Receipt}}
	}
	return onChain{other: &tx, ours: sameCallRaw(a.Raw, tx.Raw)}
}

// receipt is hash's receipt: prefetch's answer, or the ledger's.
func (c *confirmCycle) receipt(ctx context.Context, hash string) (ledger.Receipt, error) {
	if rc, ok := c.receipts[hash]; ok {
		return rc, nil
	}
	return c.readReceipt(ctx, hash)
}

// readReceipt asks the ledger for hash's receipt.
func (c *confirmCycle) readReceipt(ctx context.Context, hash string) (ledger.Receipt, error) {
	return wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (ledger.Receipt, error) {
		return c.m.ledger.TransactionReceipt(ctx, ledger.TxHash(common.HexToHash(hash)))
	})
}

// prefetchers is how many receipt reads prefetch has in flight at once.
const prefetchers = 8

// prefetch reads the receipts of the attempts' own hashes, prefetchers at a
// time, into c.receipts, so that a step's one-by-one lookUp waits for one
// round trip per prefetchers attempts instead of one per attempt. A failed
// read is left out: lookUp reads it again, and a failure there is "ask
// again later" as before. It stops at the cycle's budget.
func (c *confirmCycle) prefetch(ctx context.Context, b wallet.Budget, atts []store.Attempt) {
	var todo []string
	for _, a := range atts {
		if _, ok := c.receipts[a.TxHash]; !ok {
			todo = append(todo, a.TxHash)
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range min(prefetchers, len(todo)) {
		wg.Go(func() {
			for h := range next {
				rc, err := c.readReceipt(ctx, h)
				if err == nil {
					mu.Lock()
					c.receipts[h] = rc
					mu.Unlock()
				}
			}
		})
	}
	for i, h := range todo {
		if b.Spent(i) || ctx.Err() != nil {
			break
		}
		next <- h
	}
	close(next)
	wg.Wait()
}

// sameCallRaw reports whether two signed transactions send the same value
// and data to the same recipient (false when either does not decode).
func sameCallRaw(a, b []byte) bool {
	var x, y types.Transaction
	if x.UnmarshalBinary(a) != nil || y.UnmarshalBinary(b) != nil {
		return false
	}
	return sameCall(&x, &y)
}

// txAtNonce returns the wallet's transaction the chain's blocks hold at
// nonce, from one TxsAtNonce call per block and cycle; ok is false when it
// could not tell.
func (c *confirmCycle) txAtNonce(ctx context.Context, nonce uint64) (ledger.NonceTx, bool) {
	if tx, ok := c.atNonce[nonce]; ok {
		return tx, true
	}
	type answer struct {
		txs   []ledger.NonceTx
		found bool
	}
	addr := c.Wallet.Address()
	got, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (answer, error) {
		txs, found, err := c.m.ledger.TxsAtNonce(ctx, addr, nonce)
		return answer{txs, found}, err
	})
	if err != nil || !got.found {
		c.m.cfg.Logger.Debug("wallet: reading the block of a nonce failed, asking again later", "shard", c.Claim.Key, "nonce", nonce, "error", err)
		return ledger.NonceTx{}, false
	}
	for _, tx := range got.txs {
		if canonical, known := c.canonical(ctx, tx.Receipt); known && canonical {
			c.atNonce[tx.Nonce] = tx
		}
	}
	tx, ok := c.atNonce[nonce]
	return tx, ok
}

// record turns a receipt of a's nonce into a's Outcome: wallet.Mined in its block,
// or final.
func (c *confirmCycle) record(a store.Attempt, f found) wallet.Result {
	if c.mined == nil {
		c.mined = map[string]ledger.Receipt{}
	}
	c.mined[f.hash] = f.receipt
	return wallet.Result{Attempt: a, Outcome: wallet.Mined, Hash: f.hash, Reverted: f.receipt.Status == ledger.ReceiptReverted,
		Block: f.receipt.BlockNumber, BlockHash: f.receipt.BlockHash.Hex(), Final: c.final(f.receipt.BlockNumber),
		GasUsed: f.receipt.GasUsed, EffectiveGasPrice: f.receipt.EffectiveGasPrice}
}

// checkMinedFrom is step 1: mined or confirmed attempts the chain's nonce,
// as read, has not reached. A nonce read lower than one already read is
// not believed for what it frees (TrustChainNonce), but the attempts it
// did not reach are still checked here: a reorganisation to a longer chain
// without them lowers the nonce while the head rises, and only their
// blocks, read again, tell it from a lagging node (leftChain).
func (c *confirmCycle) checkMinedFrom(ctx context.Context, b wallet.Budget) error {
	gone, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.Attempt, error) {
		return c.m.store.AttemptListMinedFrom(ctx, store.AttemptListFromParams{
			ChainID: c.ChainID(), Sender: c.Sender, From: int64(c.readNonce), Max: c.m.cfg.InFlight,
		})
	})
	if err != nil {
		return err
	}
	c.prefetch(ctx, b, gone)
	for i, a := range gone {
		if b.Spent(i) {
			break // the next run looks again
		}
		got := c.lookUp(ctx, a)
		switch {
		case got.ok:
			// The node's nonce lags its receipts (another node behind a
			// load balancer): the receipt decides, and a confirmed attempt
			// stays as it is.
			if a.State == store.AttemptMined {
				c.confirmed = append(c.confirmed, c.record(a, got.found))
			}
		default:
			c.reopenIfLeft(ctx, a)
		}
	}
	return nil
}

// reopenIfLeft reopens a, found nowhere on the chain (or not found for a
// failed lookup), when the chain shows its block gone (leftChain);
// otherwise it waits for the next run.
func (c *confirmCycle) reopenIfLeft(ctx context.Context, a store.Attempt) {
	why, left := c.leftChain(ctx, a)
	if !left {
		c.m.cfg.Logger.Debug("wallet: no receipt found for a mined transaction, but its block is not shown gone: asking again later",
			"shard", c.Claim.Key, "nonce", a.Nonce, "tx_hash", a.TxHash, "block", blockOf(a))
		return
	}
	c.reopened = append(c.reopened, reopened{Attempt: a, Reason: why})
}

// checkMined is step 2: mined attempts below the chain's nonce as read,
// not yet final.
func (c *confirmCycle) checkMined(ctx context.Context, b wallet.Budget) error {
	minedAtts, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.Attempt, error) {
		return c.m.store.AttemptListMined(ctx, store.AttemptListParams{ChainID: c.ChainID(), Sender: c.Sender, Max: c.m.cfg.InFlight})
	})
	if err != nil {
		return err
	}
	below := make([]store.Attempt, 0, len(minedAtts))
	for _, a := range minedAtts {
		if a.Nonce < int64(c.readNonce) {
			below = append(below, a)
		}
	}
	c.prefetch(ctx, b, below)
	calls := 0
	for _, a := range minedAtts {
		if a.Nonce >= int64(c.readNonce) {
			continue // step 1's
		}
		if b.Spent(calls) {
			break
		}
		calls++
		got := c.lookUp(ctx, a)
		switch {
		case got.ok:
			r := c.record(a, got.found)
			if r.Final || r.Hash != a.TxHash || r.Block != blockOf(a) || r.BlockHash != a.MinedBlockHash {
				c.confirmed = append(c.confirmed, r)
			}
		default:
			c.reopenIfLeft(ctx, a)
		}
	}
	return nil
}

// lookUpReceipts is step 3: the chain's nonce passed these attempts, so
// each was mined or another transaction took its nonce. A receipt makes the
// attempt mined (the task done when it is deep enough; a reverted one too).
// A failed lookup means "ask again later". An attempt is replaced only when
// the chain's own blocks show another transaction at its nonce, that
// transaction is final, and no hash of ours has been mined for
// ReplacedAfter: it is dropped and its task sent again with a new nonce
// (engine-core counted a failed lookup as a replacement and sent the
// transaction twice; a node's index by hash can be stale after it lost
// blocks, so "no receipt" alone is not enough either).
func (c *confirmCycle) lookUpReceipts(ctx context.Context, b wallet.Budget) error {
	passed, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.Attempt, error) {
		return c.m.store.AttemptListSentBelow(ctx, store.AttemptListParams{
			ChainID: c.ChainID(), Sender: c.Sender, Below: int64(c.chainNonce), Max: c.m.cfg.InFlight,
		})
	})
	if err != nil {
		return err
	}
	now := c.m.cfg.Clock.Now()
	absent := map[string]time.Time{}
	c.m.mu.Lock()
	before := c.m.absent[c.Claim.Key]
	c.m.mu.Unlock()
	c.prefetch(ctx, b, passed)
	for i, a := range passed {
		if b.Spent(i) {
			// The rest are asked about in the next run; keep their clocks.
			for _, rest := range passed[i:] {
				if since, ok := before[rest.TxHash]; ok {
					absent[rest.TxHash] = since
				}
			}
			break
		}
		got := c.lookUp(ctx, a)
		switch {
		case got.ok:
			c.confirmed = append(c.confirmed, c.record(a, got.found))
		case got.other == nil:
			// A failed lookup (or a nonce the chain no longer passes):
			// "ask again later", never "absent".
			if since, ok := before[a.TxHash]; ok {
				absent[a.TxHash] = since
			}
		case got.ours:
			c.forgotten = append(c.forgotten, forgottenBump{Attempt: a, Tx: *got.other})
		default:
			since, ok := before[a.TxHash]
			if !ok {
				since = now
			}
			// Another transaction holds the nonce in the chain's blocks.
			// Ours can land only if that block leaves the chain: the task
			// is sent again only once it is final and ReplacedAfter has
			// passed.
			if other := got.other; now.Sub(since) >= c.m.cfg.ReplacedAfter && c.final(other.Receipt.BlockNumber) {
				c.replaced = append(c.replaced, wallet.Result{Attempt: a, Outcome: wallet.Requeued, Replaced: true,
					Reason: fmt.Sprintf("replaced: transaction %s took nonce %d in block %d; no hash of ours is mined (since %s)",
						other.Hash.Hex(), a.Nonce, other.Receipt.BlockNumber, since.Format(time.RFC3339))})
				continue
			}
			absent[a.TxHash] = since
		}
	}
	c.m.mu.Lock()
	c.m.absent[c.Claim.Key] = absent
	c.m.mu.Unlock()
	return nil
}

// broadcastAgain is step 4: it sends again, with the same bytes, the
// attempts the chain has not reached that it may not have: those step 1 or
// 2 found off the chain, the sent ones whose last broadcast was
// indeterminate (the node may never have taken them, and every later nonce
// would wait on them), and, when the chain lost blocks or its nonce has not
// moved for RebroadcastAfter, every sent one from the chain's nonce on. The
// same bytes make it harmless when the node has them (`already known`).
func (c *confirmCycle) broadcastAgain(ctx context.Context) error {
	var due []store.Attempt
	for _, r := range c.reopened {
		a := r.Attempt
		a.State = store.AttemptSent
		due = append(due, a)
	}
	c.rebroadcast = len(c.reopened) > 0 || c.stuck()
	var err error
	var live []store.Attempt
	if c.rebroadcast {
		live, err = wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.Attempt, error) {
			return c.m.store.AttemptListSentFrom(ctx, store.AttemptListFromParams{
				ChainID: c.ChainID(), Sender: c.Sender, From: int64(c.chainNonce), Max: c.m.cfg.InFlight,
			})
		})
	} else {
		live, err = wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.Attempt, error) {
			return c.m.store.AttemptListUncertain(ctx, store.AttemptListFromParams{
				ChainID: c.ChainID(), Sender: c.Sender, From: int64(c.chainNonce), Max: c.m.cfg.InFlight,
			})
		})
	}
	if err != nil {
		return err
	}
	due = mergeByNonce(due, live)
	// The same bytes again, prefetchers at a time: none of them is fresh
	// (each was broadcast before), so their order does not matter to the
	// node, and each answer is classed alone.
	b := c.Budget()
	for i := 0; i < len(due); i += prefetchers {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.Spent(i) {
			break // the next run's confirm sends the rest
		}
		round := due[i:min(i+prefetchers, len(due))]
		results := make([]wallet.Result, len(round))
		var wg sync.WaitGroup
		for j, a := range round {
			wg.Go(func() { results[j] = c.resend(ctx, a) })
		}
		wg.Wait()
		c.resent = append(c.resent, results...)
	}
	return nil
}

// resend broadcasts a again and classes the answer.
func (c *confirmCycle) resend(ctx context.Context, a store.Attempt) wallet.Result {
	err := c.Send(ctx, a.Raw)
	r := wallet.Result{Attempt: a, Outcome: wallet.Sent}
	switch res := ledger.SendResultOf(err); res {
	case ledger.SendAccepted:
	case ledger.SendRejected:
		if a.Reorgs > 0 || c.isReopened(a) || c.IsBump(ctx, a) {
			// A transaction that was mined once (its block left the
			// chain) or a bump whose superseded attempt may still be
			// mined: the refusal is of this moment (the balance the
			// reorg took back, say); its nonce stays held and the
			// next pass sends it again.
			r.Reason = fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
			break
		}
		r.Outcome, r.Reason = wallet.Rejected, ledger.ReasonOf(err)
	default:
		// Still uncertain (or, for `nonce too low`, mined or replaced
		// since the nonce was read: the next confirm finds out).
		r.Reason = fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
	}
	return r
}

// isReopened reports whether step 1 or 2 found a off the chain.
func (c *confirmCycle) isReopened(a store.Attempt) bool {
	for _, r := range c.reopened {
		if r.Attempt.ID == a.ID {
			return true
		}
	}
	return false
}

// stuck reports whether the chain's nonce has not moved for
// RebroadcastAfter, and the sent attempts were not broadcast again for as
// long.
func (c *confirmCycle) stuck() bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	w := c.m.watch[c.Claim.Key]
	now := c.m.cfg.Clock.Now()
	if w == nil || w.nonce != c.chainNonce {
		return false
	}
	after := c.m.cfg.RebroadcastAfter
	return now.Sub(w.since) >= after && now.Sub(w.rebroadcastAt) >= after
}

// blockOf is the block a mined attempt was last seen in (0: none).
func blockOf(a store.Attempt) uint64 {
	if a.MinedBlock == nil {
		return 0
	}
	return uint64(*a.MinedBlock)
}

// sortByNonce sorts attempts by nonce, then by when they were stored.
func sortByNonce(as []store.Attempt) {
	slices.SortFunc(as, func(a, b store.Attempt) int { return cmp.Or(cmp.Compare(a.Nonce, b.Nonce), cmp.Compare(a.ID, b.ID)) })
}

// mergeByNonce returns a and b in nonce order, each attempt once.
func mergeByNonce(a, b []store.Attempt) []store.Attempt {
	seen := make(map[int64]bool, len(a))
	out := append([]store.Attempt(nil), a...)
	for _, x := range a {
		seen[x.ID] = true
	}
	for _, x := range b {
		if !seen[x.ID] {
			out = append(out, x)
		}
	}
	sortByNonce(out)
	return out
}

// Commit records, in one fenced transaction, the chain's nonce and head,
// the attempts that left the chain, the receipts (mined or final) with
// the logs and reverts of the tasks they end done, the replacements and
// the new broadcasts; the run's send starts at or above
// the chain's nonce.
func (c *confirmCycle) Commit(ctx context.Context) error {
	if c.lagging {
		// Nothing is known of this moment: the run signs nothing
		// (Run.ChainRead stays false) and the next one asks again.
		return nil
	}
	if len(c.confirmed) > 0 {
		crashpoint.Hit(wallet.CrashMined)
	}
	now := c.m.cfg.Clock.Now()
	outs := c.taskOutcomes()
	var reorgs int
	err := c.Fenced(ctx, func(tx *store.Store) error {
		reorgs = 0
		if err := tx.WalletHealthObserveNonce(ctx, now, c.ChainID(), c.Sender, int64(c.chainNonce), int64(c.head.Number)); err != nil {
			return err
		}
		for _, r := range c.reopened {
			_, err := tx.AttemptReopen(ctx, store.AttemptReopenParams{Now: now, ChainID: c.ChainID(), TxHash: r.Attempt.TxHash, Reason: r.Reason})
			if err = c.Tolerate(err, "reopen"); err != nil {
				return err
			}
			reorgs++
		}
		if err := c.RecordResults(ctx, tx, now, c.confirmed); err != nil {
			return err
		}
		if err := c.recordForgotten(ctx, tx, now); err != nil {
			return err
		}
		if _, err := tx.TaskRecordOutcomes(ctx, outs); err != nil {
			return err
		}
		if err := c.RecordResults(ctx, tx, now, c.replaced); err != nil {
			return err
		}
		for _, r := range c.resent {
			var err error
			if r.Outcome == wallet.Rejected {
				err = c.RecordRejected(ctx, tx, now, r.Attempt, r.Reason)
			} else {
				_, err = tx.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: c.ChainID(), TxHash: r.Attempt.TxHash, Error: r.Reason})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording the confirmations of %s: %w", c.Claim.Key, err)
	}
	c.remember(now)
	if len(c.reopened) > 0 {
		// The chain showed blocks gone: a lower nonce is the chain's, not
		// a lagging node's, from the next read on.
		c.ForgetChainNonce()
	}
	c.LearnChainNonce(c.chainNonce)
	c.Run.ChainRead = true
	c.ConfirmRead()
	c.m.cfg.Metrics.Transition("wallet", "replaced", len(c.replaced))
	c.m.cfg.Metrics.Transition("wallet", "reorged", reorgs)
	for _, r := range c.reopened {
		c.m.cfg.Logger.Warn("wallet: a mined transaction left the chain, sending it again", "shard", c.Claim.Key, "task", r.Attempt.TaskID,
			"nonce", r.Attempt.Nonce, "tx_hash", r.Attempt.TxHash, "reason", r.Reason)
	}
	c.LogResults(c.replaced)
	c.LogResults(c.resent)
	for _, f := range c.forgotten {
		c.m.cfg.Logger.Warn("wallet: the chain holds, at a sent attempt's nonce, a transaction of this wallet sending the same that the database "+
			"did not know (a gas bump, restored behind the chain?); recorded as the attempt's bump, the task is not sent again",
			"shard", c.Claim.Key, "task", f.Attempt.TaskID, "nonce", f.Attempt.Nonce, "old_tx_hash", f.Attempt.TxHash, "tx_hash", f.Tx.Hash.Hex())
	}
	return nil
}

// recordForgotten stores each forgotten bump as the bump of its attempt,
// sent, and records its receipt (mined, or final: the task done).
func (c *confirmCycle) recordForgotten(ctx context.Context, tx *store.Store, now time.Time) error {
	for _, f := range c.forgotten {
		var decoded types.Transaction
		if err := decoded.UnmarshalBinary(f.Tx.Raw); err != nil {
			return fmt.Errorf("decoding transaction %s: %w", f.Tx.Hash.Hex(), err)
		}
		bump := store.SignedTx{
			TaskID: f.Attempt.TaskID, Nonce: f.Attempt.Nonce, TxHash: decoded.Hash().Hex(), Raw: f.Tx.Raw, GasLimit: decoded.Gas(),
			MaxFeePerGas: decoded.GasFeeCap(), MaxPriorityFeePerGas: decoded.GasTipCap(),
		}
		err := tx.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, Old: f.Attempt.TxHash, New: bump})
		if errors.Is(err, store.ErrNotFound) {
			c.m.cfg.Logger.Info("wallet: the attempt moved meanwhile, its forgotten bump not recorded", "shard", c.Claim.Key, "tx_hash", f.Attempt.TxHash)
			continue
		}
		if err != nil {
			return err
		}
		if _, err := tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: c.ChainID(), TxHashes: []string{bump.TxHash}}); err != nil {
			return err
		}
		a := f.Attempt
		a.SignedTx = bump
		r := c.record(a, found{hash: bump.TxHash, receipt: f.Tx.Receipt})
		if err := c.RecordResults(ctx, tx, now, []wallet.Result{r}); err != nil {
			return err
		}
	}
	return nil
}

// remember keeps, for the next runs, since when the chain's nonce has not
// moved and when the sent attempts were last broadcast again.
func (c *confirmCycle) remember(now time.Time) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	w := c.m.watch[c.Claim.Key]
	if w == nil || w.nonce != c.chainNonce {
		w = &chainWatch{nonce: c.chainNonce, since: now}
		c.m.watch[c.Claim.Key] = w
	}
	if c.rebroadcast {
		w.rebroadcastAt = now
	}
}

// Drop records nothing: the attempts stay as they were and the next run's
// confirm asks again.
func (c *confirmCycle) Drop(context.Context, error) error { return nil }
