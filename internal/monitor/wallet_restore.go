package monitor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// A database restored from a backup older than the chain has forgotten what
// it signed after the backup: tasks that were waiting in the backup and were
// sent and mined since are waiting again, with no attempt. Signing them
// again would pay them twice. The chain still knows: the wallet's nonce is
// above what the database holds, and the chain's blocks hold the wallet's
// transactions at those nonces, each signed by its key.
//
// So before anything is signed, once per run, the keeper lists the nonces
// below the chain's nonce that no attempt holds: from the wallet's next
// nonce on, and the freed ones below it (store.AttemptListUnknownNonces); reads the
// wallet's transaction at each from the chain's blocks (TxsAtNonce, never
// the node's index by hash) and records it as a mined attempt: carrying the
// first waiting task, in the order the lane sends them, whose recipient,
// value and data it has (that task then ends done by the lane's
// confirmation rules, with the transaction the chain holds), or no task (its
// nonce is taken: it is never signed again). All of one cycle is recorded in
// one fenced transaction, and a recorded nonce is no longer unknown, so a
// crash at any point leaves either nothing or everything of the cycle.
//
// TxsAtNonce finds a nonce's block by the account's nonce at past blocks,
// which a node that is not an archive node cannot answer for old blocks.
// When it fails, the blocks themselves are read one by one (TxsInBlock),
// from the block of the wallet's highest mined attempt (its later
// transactions are there or after it) towards the head, at most
// wallet.Config.RestoreLookback blocks back; the next block to read is kept in
// wallet_health.scan_block between runs, so a long read goes on where it
// stopped.
//
// A wallet with unknown nonces left (more than a cycle covers) or whose
// transactions cannot be read (the node does not answer, or they lie further
// back than the lookback) signs nothing: no reconciliation, no no-op, no
// send. The reason is recorded in wallet_health.recovery_reason until every
// unknown nonce is known.

// collectUnknown lists the unknown nonces and the waiting tasks they may
// carry.
func (k *WalletKeeper) collectUnknown(ctx context.Context, s *wallet.Shard) (workers.Cycle, error) {
	if !s.Run.ChainRead {
		// The chain's nonce was not read this run: nothing can be known of
		// its unknown nonces, so nothing is signed.
		s.Run.Recovering = true
		return nil, nil
	}
	limit := k.cfg.InFlight
	nonces, err := wallet.DBCall(ctx, s, func(ctx context.Context) ([]int64, error) {
		return k.store.AttemptListUnknownNonces(ctx, s.ChainID(), s.Sender, int64(s.Run.ChainNonce), limit)
	})
	if err != nil {
		return nil, err
	}
	if len(nonces) == 0 {
		h, err := wallet.DBCall(ctx, s, func(ctx context.Context) (store.WalletHealth, error) {
			return k.store.WalletHealthGet(ctx, s.ChainID(), s.Sender)
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, nil
		case err != nil:
			return nil, err
		case h.RecoveryReason != nil:
			return &unknownCycle{Shard: s, WalletKeeper: k, complete: true}, nil
		}
		return nil, nil
	}
	tasks, err := wallet.DBCall(ctx, s, func(ctx context.Context) ([]store.Task, error) {
		return k.store.TaskNextWaiting(ctx, store.TaskNextWaitingParams{
			ChainID: s.ChainID(), Sender: s.Sender, Queue: k.cfg.QueueType, Max: limit + len(nonces),
		})
	})
	if err != nil {
		return nil, err
	}
	c := &unknownCycle{Shard: s, WalletKeeper: k, nonces: nonces, tasks: tasks, more: len(nonces) == limit}
	c.lastMined, err = wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
		return k.store.AttemptGetLastMinedBlock(ctx, s.ChainID(), s.Sender)
	})
	if err != nil {
		return nil, err
	}
	h, err := wallet.DBCall(ctx, s, func(ctx context.Context) (store.WalletHealth, error) {
		return k.store.WalletHealthGet(ctx, s.ChainID(), s.Sender)
	})
	switch {
	case err == nil:
		c.scanFrom = h.ScanBlock
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return c, nil
}

// unknownCycle finds the wallet's transactions at nonces the database does
// not know and records them.
type unknownCycle struct {
	*wallet.Shard
	*WalletKeeper
	nonces []int64
	tasks  []store.Task
	// more: the list was full, so more unknown nonces may remain.
	more bool
	// lastMined is the block of the wallet's highest mined attempt (-1:
	// none); scanFrom, when set, the next block a read one by one left off
	// at.
	lastMined int64
	scanFrom  *int64

	// Execute's results: found, in nonce order, each with its receipt;
	// complete when every listed nonce was found; held: why not.
	found    []wallet.Result
	complete bool
	held     string
	// scanned: blocks were read one by one; scanNext is then the next block
	// to read (nil: start again from the last mined block).
	scanned  bool
	scanNext *int64
}

// Execute reads the chain's blocks; it writes nothing.
func (c *unknownCycle) Execute(ctx context.Context) error {
	if len(c.nonces) == 0 {
		return nil // only the hold is released
	}
	if err := c.CheckChain(ctx); err != nil {
		return err
	}
	head, err := wallet.LedgerCall(ctx, c.Shard, c.ledger.HeadBlock)
	if err != nil {
		return fmt.Errorf("reading the chain's head for %s: %w", c.Claim.Key, err)
	}
	if c.ObserveHead(head.Number) {
		// A node behind the others: its blocks end too early to tell where
		// the unknown nonces are. Nothing is recorded, the wallet signs
		// nothing, and the next run looks again.
		return nil
	}
	depth := c.cfg.ConfirmationsOn(c.ChainID())
	addr := c.Wallet.Address()
	chainID := big.NewInt(c.ChainID())
	signer := types.LatestSignerForChainID(chainID)
	taken := make([]bool, len(c.tasks))
	known := map[uint64]ledger.NonceTx{}
	b := c.Budget()
	scan := &blockScan{c: c, head: head.Number, known: known, budget: b}
	if c.scanFrom != nil {
		scan.start(max(*c.scanFrom, c.lastMined))
	}
	calls := 0
	for _, n := range c.nonces {
		tx, ok := known[uint64(n)]
		if !ok && !scan.on {
			if b.Spent(calls) {
				return nil // the next run goes on
			}
			calls++
			type answer struct {
				txs   []ledger.NonceTx
				found bool
			}
			got, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (answer, error) {
				txs, found, err := c.ledger.TxsAtNonce(ctx, addr, uint64(n))
				return answer{txs, found}, err
			})
			switch {
			case err != nil:
				// A node that cannot search past state: read the blocks.
				c.cfg.Logger.Info("wallet: the chain's block of an unknown nonce could not be found by the account's nonce, reading blocks one by one",
					"shard", c.Claim.Key, "nonce", n, "error", err)
				scan.searchErr = err
				from := c.lastMined
				if lookback := c.cfg.RestoreLookback; from < 0 && lookback > 0 && head.Number > lookback {
					// No mined attempt says where to start: as far back
					// as the lookback allows.
					from = int64(head.Number - lookback)
				}
				scan.start(from)
			case !got.found:
				return nil // the chain's nonce went back meanwhile: the next run looks again
			default:
				for _, t := range got.txs {
					known[t.Nonce] = t
				}
				if tx, ok = known[uint64(n)]; !ok {
					c.held = fmt.Sprintf("the chain used nonce %d, which no transaction in this database holds, and its block does not show it", n)
					return nil
				}
			}
		}
		if !ok && scan.on {
			if tx, ok = scan.find(ctx, uint64(n)); !ok {
				return nil // held, or the next run reads on from scan.next
			}
		}
		var decoded types.Transaction
		if err := decoded.UnmarshalBinary(tx.Raw); err != nil || decoded.Hash() != common.Hash(tx.Hash) {
			c.held = fmt.Sprintf("the chain used nonce %d, which no transaction in this database holds, and its transaction %s could not be decoded", n, tx.Hash.Hex())
			return nil
		}
		if from, err := types.Sender(signer, &decoded); err != nil || from != common.Address(addr) || decoded.Nonce() != uint64(n) {
			c.held = fmt.Sprintf("the chain's block holding nonce %d gave transaction %s, which is not the wallet's at that nonce", n, tx.Hash.Hex())
			return nil
		}
		signed := store.SignedTx{
			Nonce: n, TxHash: decoded.Hash().Hex(), Raw: tx.Raw, GasLimit: decoded.Gas(),
			MaxFeePerGas: decoded.GasFeeCap(), MaxPriorityFeePerGas: decoded.GasTipCap(),
		}
		for k, t := range c.tasks {
			if !taken[k] && carries(&decoded, t.Request) {
				taken[k] = true
				signed.TaskID = t.ID
				break
			}
		}
		rc := tx.Receipt
		c.found = append(c.found, wallet.Result{
			Attempt: store.Attempt{SignedTx: signed}, Outcome: wallet.Mined, Hash: signed.TxHash,
			Reverted: rc.Status == ledger.ReceiptReverted, Block: rc.BlockNumber, BlockHash: rc.BlockHash.Hex(),
			Final: finalAt(depth, head.Number, rc.BlockNumber),
		})
	}
	c.complete = !c.more
	if c.complete {
		c.scanNext = nil
	}
	return nil
}

// blockScan reads the chain's blocks one by one for the wallet's
// transactions, from where the last read stopped or the wallet's last mined
// block, towards the head, within the cycle's budget and
// wallet.Config.RestoreLookback.
type blockScan struct {
	c         *unknownCycle
	head      uint64
	known     map[uint64]ledger.NonceTx
	budget    wallet.Budget
	searchErr error

	on    bool
	next  uint64
	calls int
}

// start begins the read at block from.
func (s *blockScan) start(from int64) {
	s.on = true
	s.next = uint64(max(from, 0))
	s.c.scanned = true
}

// find reads blocks until nonce's transaction is found. Not found, it
// records where the next run goes on (a budget spent) or why the wallet is
// held (a failed read, a lookback exceeded, the head passed without it).
func (s *blockScan) find(ctx context.Context, nonce uint64) (ledger.NonceTx, bool) {
	c := s.c
	lookback := c.cfg.RestoreLookback
	why := "the node could not find it by the account's nonce at past blocks"
	if s.searchErr != nil {
		why = fmt.Sprintf("the node could not find it by the account's nonce at past blocks (%v)", s.searchErr)
	}
	if lookback == 0 || s.head > s.next && s.head-s.next > lookback {
		c.held = fmt.Sprintf("the chain used nonce %d, which no transaction in this database holds (restored from an older backup?); %s, "+
			"and reading the blocks one by one from block %d (the last this database knows of the wallet) to the head %d is more than "+
			"--wallet-restore-lookback (%d) blocks: point the wallet lane at an archive node, or raise the lookback", nonce, why, s.next, s.head, lookback)
		return ledger.NonceTx{}, false
	}
	for s.next <= s.head {
		if tx, ok := s.known[nonce]; ok {
			return tx, true
		}
		if s.budget.Spent(s.calls) {
			c.scanNext = new(int64(s.next))
			c.held = fmt.Sprintf("the chain used nonces this database does not know (restored from an older backup?); %s: "+
				"reading the chain's blocks one by one for the wallet's transactions, at block %d of %d", why, s.next, s.head)
			return ledger.NonceTx{}, false
		}
		s.calls++
		type answer struct {
			txs   []ledger.NonceTx
			found bool
		}
		addr := c.Wallet.Address()
		n := s.next
		got, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (answer, error) {
			txs, found, err := c.ledger.TxsInBlock(ctx, addr, n)
			return answer{txs, found}, err
		})
		if err != nil {
			c.scanNext = c.scanFrom
			if s.calls > 1 {
				c.scanNext = new(int64(n)) // go on from here
			}
			c.held = fmt.Sprintf("the chain used nonce %d, which no transaction in this database holds (restored from an older backup?); %s, "+
				"and block %d could not be read: %v", nonce, why, n, err)
			return ledger.NonceTx{}, false
		}
		if !got.found {
			break
		}
		for _, t := range got.txs {
			s.known[t.Nonce] = t
		}
		s.next++
	}
	if tx, ok := s.known[nonce]; ok {
		return tx, true
	}
	// Past the head without it: the chain moved meanwhile. Start again.
	c.scanNext = nil
	c.held = fmt.Sprintf("the chain used nonce %d, which no transaction in this database holds, and no block up to the head %d shows it", nonce, s.head)
	return ledger.NonceTx{}, false
}

// carries reports whether tx does what a task asks: its recipient, its value
// and its data.
func carries(tx *types.Transaction, r store.TaskRequest) bool {
	if tx.To() == nil || !common.IsHexAddress(r.To) || *tx.To() != common.HexToAddress(r.To) {
		return false
	}
	value := r.Value
	if value == nil {
		value = new(big.Int)
	}
	return tx.Value().Cmp(value) == 0 && bytes.Equal(tx.Data(), r.Data)
}

// sameCall reports whether two transactions send the same value and data to
// the same recipient: one is the other with other fees (a gas bump).
func sameCall(a, b *types.Transaction) bool {
	switch {
	case (a.To() == nil) != (b.To() == nil):
		return false
	case a.To() != nil && *a.To() != *b.To():
		return false
	}
	return a.Value().Cmp(b.Value()) == 0 && bytes.Equal(a.Data(), b.Data())
}

// Commit records, in one fenced transaction, the transactions found (their
// tasks executing, their attempts mined or confirmed, tasks done when deep
// enough) and the wallet's hold or its release.
func (c *unknownCycle) Commit(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	var released bool
	err := c.Fenced(ctx, func(tx *store.Store) error {
		released = false
		if len(c.found) > 0 {
			txs := make([]store.SignedTx, len(c.found))
			for i, r := range c.found {
				txs[i] = r.Attempt.SignedTx
			}
			if err := tx.AttemptAdopt(ctx, store.AttemptAdoptParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, Txs: txs}); err != nil {
				return err
			}
			if err := c.RecordResults(ctx, tx, now, c.found); err != nil {
				return err
			}
		}
		if c.scanned {
			if err := tx.WalletHealthSetScan(ctx, now, c.ChainID(), c.Sender, c.scanNext); err != nil {
				return err
			}
		}
		switch {
		case c.held != "":
			return tx.WalletRecoveryHold(ctx, now, c.ChainID(), c.Sender, c.held)
		case c.complete:
			var err error
			released, err = tx.WalletRecoveryEnd(ctx, now, c.ChainID(), c.Sender)
			return err
		}
		return nil
	})
	var notWaiting *store.TaskNotWaitingError
	if errors.As(err, &notWaiting) {
		c.cfg.Logger.Info("wallet: a task left the queue while the chain's transactions were matched, looking again", "shard", c.Claim.Key)
		c.Run.Recovering = true
		return nil
	}
	if err != nil {
		c.Run.Recovering = true
		return fmt.Errorf("recording the transactions the chain holds at unknown nonces of %s: %w", c.Claim.Key, err)
	}
	c.Run.Recovering = !c.complete
	for _, r := range c.found {
		a := r.Attempt
		if a.TaskID != "" {
			c.cfg.Logger.Warn("wallet: the chain holds a transaction of this wallet the database did not know (restored behind the chain?); "+
				"the waiting task it carries is not sent again", "shard", c.Claim.Key, "task", a.TaskID, "nonce", a.Nonce, "tx_hash", a.TxHash, "block", r.Block)
		} else {
			c.cfg.Logger.Warn("wallet: the chain holds a transaction of this wallet at a nonce the database did not know, carrying no waiting task; "+
				"its nonce is not used again", "shard", c.Claim.Key, "nonce", a.Nonce, "tx_hash", a.TxHash, "block", r.Block)
		}
	}
	switch {
	case c.held != "":
		c.cfg.Logger.Warn("wallet: held, nothing is signed for it", "shard", c.Claim.Key, "reason", c.held)
	case released:
		c.cfg.Logger.Info("wallet: every nonce the chain used is known again, no longer held", "shard", c.Claim.Key)
	}
	c.cfg.Metrics.Transition("wallet", "recovered", len(c.found))
	return nil
}

// Drop records nothing, and the run signs nothing: the next run looks
// again.
func (c *unknownCycle) Drop(context.Context, error) error {
	c.Run.Recovering = true
	return nil
}
