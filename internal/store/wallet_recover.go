package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// AttemptListUnknownNonces returns, lowest first and at most limit, the nonces
// below chainNonce that the chain used and that no attempt of the wallet
// holds (none, or only dropped ones): those from the wallet's next nonce on,
// and the freed ones below it (attempts, all dropped) from the one after its
// highest mined or confirmed attempt. A database restored from a backup
// older than the chain has such nonces (the transactions it signed after
// the backup), as has a wallet someone else sent from. A wallet for which
// nothing was ever signed has none; nonces below the next one with no
// attempt at all (deleted by retention, or skipped when the next nonce was
// raised) are not listed. It is one statement: it runs on every wallet run.
func (s *Store) AttemptListUnknownNonces(ctx context.Context, chainID int64, sender string, chainNonce int64, limit int) ([]int64, error) {
	if limit <= 0 || chainNonce <= 0 {
		return nil, nil // the chain used no nonce, or none is asked for
	}
	sender = lowerHex(sender)
	nonces, err := s.q.AttemptListUnknownNonces(ctx, dbsqlc.AttemptListUnknownNoncesParams{
		ChainID: chainID, Sender: sender, LastNonce: chainNonce - 1, Max: int32(min(limit, 1<<31-1)),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the unknown nonces of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return nonces, nil
}

// AttemptAdoptParams are transactions of the wallet that the chain mined at
// nonces no attempt holds (AttemptListUnknownNonces), found in its blocks.
type AttemptAdoptParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Txs, each at its own nonce. One with a TaskID carries that task (its
	// recipient, value and data are the task's), which must be waiting; one
	// without is recorded like a no-op: its nonce is taken.
	Txs []SignedTx
}

// AttemptAdopt records transactions the chain mined that the database does
// not know, in one transaction: each task named moves waiting -> executing,
// and each transaction is stored as an attempt and marked sent (a task's
// emits submitted). They are all below the chain's nonce: the wallet's next
// nonce is moved up to it by the reconciliation that follows (recorded as a
// nonce reset), and no send signs below it. The caller then records their receipts (AttemptConfirm), which finishes each task by
// the lane's confirmation rules. It fails, storing nothing, with
// *TaskNotWaitingError when a task left the queue meanwhile and
// *NonceTakenError when an attempt holds one of the nonces.
func (s *Store) AttemptAdopt(ctx context.Context, p AttemptAdoptParams) error {
	if len(p.Txs) == 0 {
		return nil
	}
	sender := lowerHex(p.Sender)
	key := WalletShardKey(p.ChainID, sender)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		hashes := make([]string, 0, len(p.Txs))
		for _, a := range p.Txs {
			if a.TaskID != "" {
				started, err := q.TaskStartMany(ctx, dbsqlc.TaskStartManyParams{Now: p.Now, Ids: []string{a.TaskID}, ChainID: p.ChainID, Sender: sender})
				if err != nil {
					return fmt.Errorf("starting task %q of %s: %w", a.TaskID, key, err)
				}
				if started != 1 {
					return &TaskNotWaitingError{Wanted: 1}
				}
			}
			if err := insertOne(ctx, q, p.Now, p.ChainID, sender, a); err != nil {
				return err
			}
			hashes = append(hashes, lowerHex(a.TxHash))
		}
		rows, err := q.AttemptMarkSent(ctx, dbsqlc.AttemptMarkSentParams{Now: p.Now, ChainID: p.ChainID, TxHashes: hashes})
		if err != nil {
			return fmt.Errorf("marking the found transactions of %s sent: %w", key, err)
		}
		return emitSubmitted(ctx, q, p.Now, rows)
	})
}

// WalletRecoveryHold records why nothing is signed for the wallet now (the
// chain used nonces the database does not know and their transactions could
// not be read yet); the first time is kept.
func (s *Store) WalletRecoveryHold(ctx context.Context, now time.Time, chainID int64, sender, reason string) error {
	if reason == "" {
		return errors.New("holding a wallet: no reason")
	}
	err := s.q.WalletRecoveryHold(ctx, dbsqlc.WalletRecoveryHoldParams{ChainID: chainID, Sender: lowerHex(sender), Reason: reason, Now: now})
	if err != nil {
		return fmt.Errorf("holding %s: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}

// WalletRecoveryEnd clears the wallet's hold; it reports whether it was
// held.
func (s *Store) WalletRecoveryEnd(ctx context.Context, now time.Time, chainID int64, sender string) (bool, error) {
	n, err := s.q.WalletRecoveryEnd(ctx, dbsqlc.WalletRecoveryEndParams{Now: now, ChainID: chainID, Sender: lowerHex(sender)})
	if err != nil {
		return false, fmt.Errorf("releasing %s: %w", WalletShardKey(chainID, sender), err)
	}
	return n > 0, nil
}

// AttemptGetLastMinedBlock returns the block of the wallet's highest mined
// or confirmed attempt, or -1 when it has none (or none whose block was
// kept): its transactions at later nonces are in that block or after it.
func (s *Store) AttemptGetLastMinedBlock(ctx context.Context, chainID int64, sender string) (int64, error) {
	b, err := one(s.q.AttemptGetLastMinedBlock(ctx, dbsqlc.AttemptGetLastMinedBlockParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the last mined block of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return b, nil
}

// WalletHealthSetScan records the next block to read for the wallet's
// transactions at nonces the database does not know; nil forgets it (the
// next read starts from the wallet's last mined block).
func (s *Store) WalletHealthSetScan(ctx context.Context, now time.Time, chainID int64, sender string, next *int64) error {
	err := s.q.WalletHealthSetScan(ctx, dbsqlc.WalletHealthSetScanParams{ChainID: chainID, Sender: lowerHex(sender), ScanBlock: next, Now: now})
	if err != nil {
		return fmt.Errorf("recording the block scan of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}
