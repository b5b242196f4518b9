package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// WalletChainCheck is what the chain says about one wallet after a run: the
// fault figures the database recorded and the problems the chain shows.
type WalletChainCheck struct {
	Sender common.Address
	// ChainNonce is the wallet's nonce by the latest block.
	ChainNonce uint64
	// Tasks by final status; Open are still waiting or executing.
	Done, Error, Open int
	// Bumps and Replacements summed over the tasks (wallet_tasks.bumps,
	// replacements); Noops signed (tx_attempts without a task) and, of
	// those, mined; Resets of the next nonce (wallet_health.resets).
	Bumps, Replacements, Noops, NoopsMined, Resets int
	// Problems are the failed checks.
	Problems []string
}

// CheckWalletOnChain checks one wallet's tasks against the chain, read
// through l (an ethclient-backed evm adapter or the simulated chain):
//
//   - every task ended done or error, an error with a reason;
//   - a done task has exactly one mined transaction, among every hash
//     stored for it (its bumps included), and it is the task's recorded hash;
//   - an error task has none mined;
//   - the nonces 0…ChainNonce-1 are each taken by exactly one mined
//     transaction of ours (a task's or a no-op's): contiguous from 0, none
//     used twice, none by a transaction we did not sign.
//
// tasks are the wallet's tasks (all of them: the nonces are counted from 0,
// so the wallet must be fresh). A failed receipt lookup is a problem, not an
// absence.
func CheckWalletOnChain(ctx context.Context, l ledger.WalletLedger, st *store.Store, chainID int64, sender common.Address, tasks []store.Task, callTimeout time.Duration) (WalletChainCheck, error) {
	c := WalletChainCheck{Sender: sender}
	problem := func(f string, a ...any) { c.Problems = append(c.Problems, fmt.Sprintf(f, a...)) }
	call := func(f func(context.Context) error) error {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return f(callCtx)
	}
	if err := call(func(ctx context.Context) (err error) {
		c.ChainNonce, err = l.NonceAt(ctx, ledger.Address(sender))
		return err
	}); err != nil {
		return c, fmt.Errorf("reading the nonce of %s: %w", sender.Hex(), err)
	}
	mined := func(hash string) (bool, error) {
		var r ledger.Receipt
		err := call(func(ctx context.Context) (err error) {
			r, err = l.TransactionReceipt(ctx, ledger.TxHash(common.HexToHash(hash)))
			return err
		})
		if err != nil {
			return false, fmt.Errorf("receipt of %s: %w", hash, err)
		}
		return r.Found, nil
	}
	byNonce := map[int64][]string{} // nonce -> our mined hashes
	for _, t := range tasks {
		c.Bumps += t.Bumps
		c.Replacements += t.Replacements
		switch t.Status {
		case store.TaskDone:
			c.Done++
		case store.TaskError:
			c.Error++
			if strings.TrimSpace(t.Error) == "" {
				problem("task %s ended in error without a reason", t.ID)
			}
		default:
			c.Open++
			problem("task %s is still %s", t.ID, t.Status)
		}
		atts, err := st.AttemptListByTask(ctx, t.ID)
		if err != nil {
			return c, err
		}
		var minedHashes []string
		for _, a := range atts {
			ok, err := mined(a.TxHash)
			if err != nil {
				return c, err
			}
			if ok {
				minedHashes = append(minedHashes, a.TxHash)
				byNonce[a.Nonce] = append(byNonce[a.Nonce], a.TxHash)
			}
		}
		switch {
		case t.Status == store.TaskDone && len(minedHashes) != 1:
			problem("done task %s has %d mined transactions on the chain %v, want 1", t.ID, len(minedHashes), minedHashes)
		case t.Status == store.TaskDone && !strings.EqualFold(minedHashes[0], t.TxHash):
			problem("done task %s records %s but %s is the one mined", t.ID, t.TxHash, minedHashes[0])
		case t.Status != store.TaskDone && len(minedHashes) > 0:
			problem("%s task %s has mined transactions %v", t.Status, t.ID, minedHashes)
		}
	}
	noops, err := st.Conns().Query(ctx, `SELECT nonce, tx_hash FROM ledgerq.tx_attempts
		WHERE chain_id = $1 AND sender = $2 AND task_id IS NULL ORDER BY nonce, tx_hash`, chainID, strings.ToLower(sender.Hex()))
	if err != nil {
		return c, fmt.Errorf("listing the no-ops of %s: %w", sender.Hex(), err)
	}
	type noop struct {
		nonce int64
		hash  string
	}
	var ns []noop
	for noops.Next() {
		var n noop
		if err := noops.Scan(&n.nonce, &n.hash); err != nil {
			noops.Close()
			return c, fmt.Errorf("reading the no-ops of %s: %w", sender.Hex(), err)
		}
		ns = append(ns, n)
	}
	noops.Close()
	if err := noops.Err(); err != nil {
		return c, fmt.Errorf("listing the no-ops of %s: %w", sender.Hex(), err)
	}
	c.Noops = len(ns)
	for _, n := range ns {
		ok, err := mined(n.hash)
		if err != nil {
			return c, err
		}
		if ok {
			c.NoopsMined++
			byNonce[n.nonce] = append(byNonce[n.nonce], n.hash)
		}
	}
	for nonce := int64(0); nonce < int64(c.ChainNonce); nonce++ {
		switch hs := byNonce[nonce]; len(hs) {
		case 1:
		case 0:
			problem("nonce %d is mined but by none of our transactions", nonce)
		default:
			problem("nonce %d is used by %d of our mined transactions %v", nonce, len(hs), hs)
		}
	}
	for nonce, hs := range byNonce {
		if nonce < 0 || uint64(nonce) >= c.ChainNonce {
			problem("nonce %d has mined transactions %v at or above the chain's nonce %d", nonce, hs, c.ChainNonce)
		}
	}
	h, err := st.WalletHealthGet(ctx, chainID, sender.Hex())
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return c, err
	default:
		c.Resets = h.Resets
	}
	return c, nil
}
