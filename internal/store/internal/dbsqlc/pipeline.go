package dbsqlc

// Not generated: queues some of this package's queries on a pgx.Batch, so
// that the statements of one transaction reach the server in one round trip
// (a batch sent outside a transaction runs as one implicit transaction).
// Each reads its rows into the generated row type, as the generated method
// does; sqlc diff ignores this file.

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// QueueBatchRecordStatusMany queues BatchRecordStatusMany; its rows are
// appended to out when the batch's results are read.
func QueueBatchRecordStatusMany(b *pgx.Batch, arg BatchRecordStatusManyParams, out *[]BatchRecordStatusManyRow) {
	b.Queue(batchRecordStatusMany, arg.Now, arg.NextCheckAt, arg.Seqs, arg.Attempts, arg.Statuses, arg.Reasons).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var i BatchRecordStatusManyRow
				if err := rows.Scan(&i.Seq, &i.ServiceID, &i.Status); err != nil {
					return err
				}
				*out = append(*out, i)
			}
			return rows.Err()
		})
}

// The batch lane's claims, each after ClaimSettingsForTx in one round trip.

// QueueClaimSettingsForTx queues ClaimSettingsForTx.
func QueueClaimSettingsForTx(b *pgx.Batch, lockTimeout string) {
	b.Queue(claimSettingsForTx, lockTimeout)
}

// QueueBatchClaimQueued queues BatchClaimQueued; its rows are appended to
// out.
func QueueBatchClaimQueued(b *pgx.Batch, arg BatchClaimQueuedParams, out *[]BatchClaimQueuedRow) {
	b.Queue(batchClaimQueued, arg.Max, arg.LeaseExpiresAt, arg.Now).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i BatchClaimQueuedRow
			if err := rows.Scan(&i.Seq, &i.ServiceID, &i.Attempts, &i.ID, &i.Payload); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueueBatchClaimExpiredHeld queues BatchClaimExpiredHeld; its rows are
// appended to out.
func QueueBatchClaimExpiredHeld(b *pgx.Batch, arg BatchClaimExpiredHeldParams, out *[]BatchClaimExpiredHeldRow) {
	b.Queue(batchClaimExpiredHeld, arg.LeaseExpiresAt, arg.Now, arg.Max).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i BatchClaimExpiredHeldRow
			if err := rows.Scan(&i.Seq, &i.ServiceID, &i.Attempts, &i.ID); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueueBatchClaimPendingForCheck queues BatchClaimPendingForCheck; its rows
// are appended to out.
func QueueBatchClaimPendingForCheck(b *pgx.Batch, arg BatchClaimPendingForCheckParams, out *[]BatchClaimPendingForCheckRow) {
	b.Queue(batchClaimPendingForCheck, arg.NextCheckAt, arg.Now, arg.Max).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i BatchClaimPendingForCheckRow
			if err := rows.Scan(&i.Seq, &i.ServiceID, &i.Attempts, &i.ID); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueueGenericPlansForTx queues GenericPlansForTx.
func QueueGenericPlansForTx(b *pgx.Batch) {
	b.Queue(genericPlansForTx)
}

// QueueBatchList queues BatchList; its rows are appended to out.
func QueueBatchList(b *pgx.Batch, arg BatchListParams, out *[]BatchListRow) {
	b.Queue(batchList, arg.Status, arg.After, arg.Max).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i BatchListRow
			if err := rows.Scan(&i.ID, &i.LedgerqBatch.ServiceID, &i.LedgerqBatch.CreatedAt, &i.LedgerqBatch.Submitted,
				&i.LedgerqBatch.Status, &i.LedgerqBatch.QueuedAt, &i.LedgerqBatch.ClaimExpiresAt, &i.LedgerqBatch.Attempts,
				&i.LedgerqBatch.LastSubmittedAt, &i.LedgerqBatch.NextCheckAt, &i.LedgerqBatch.LastError,
				&i.LedgerqBatch.ReceivedAt, &i.LedgerqBatch.FinishedAt, &i.LedgerqBatch.UpdatedAt, &i.LedgerqBatch.Seq); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueueBatchServiceLock queues BatchServiceLock.
func QueueBatchServiceLock(b *pgx.Batch, serviceIds []string) {
	b.Queue(batchServiceLock, serviceIds)
}

// QueueBatchAdmit queues BatchAdmit; its rows are appended to out.
func QueueBatchAdmit(b *pgx.Batch, arg BatchAdmitParams, out *[]BatchAdmitRow) {
	b.Queue(batchAdmit, arg.Claim, arg.ServiceIds, arg.Now, arg.LeaseExpiresAt).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i BatchAdmitRow
			if err := rows.Scan(&i.Seq, &i.ServiceID, &i.Attempts, &i.ID, &i.Payload); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueueBatchWakeIfQueued queues BatchWakeIfQueued.
func QueueBatchWakeIfQueued(b *pgx.Batch, arg BatchWakeIfQueuedParams) {
	b.Queue(batchWakeIfQueued, arg.Channel, arg.Now, arg.ServiceIds)
}

// The pool's intake in two round trips: its reads under the sender's lock,
// then its writes, admission and wake-up.

// QueueLockTimeoutForTx queues LockTimeoutForTx.
func QueueLockTimeoutForTx(b *pgx.Batch, timeout string) {
	b.Queue(lockTimeoutForTx, timeout)
}

// QueuePoolSenderLock queues PoolSenderLock; the chain nonce is set into
// out.
func QueuePoolSenderLock(b *pgx.Batch, arg PoolSenderLockParams, out *int64) {
	b.Queue(poolSenderLock, arg.ChainID, arg.Sender, arg.ChainNonce, arg.Now).
		QueryRow(func(row pgx.Row) error { return row.Scan(out) })
}

// QueuePoolTxGet queues PoolTxGet; found says whether a row was read into
// out.
func QueuePoolTxGet(b *pgx.Batch, arg PoolTxGetParams, out *LedgerqPoolTx, found *bool) {
	b.Queue(poolTxGet, arg.ChainID, arg.TxHash).QueryRow(func(row pgx.Row) error {
		i := out
		err := row.Scan(&i.ChainID, &i.TxHash, &i.Sender, &i.Nonce, &i.TxType, &i.ToAddress, &i.GasFeeCap, &i.GasTipCap,
			&i.Gas, &i.ValueWei, &i.Raw, &i.State, &i.ReplacedBy, &i.DropReason, &i.BundleBlock, &i.ReceivedAt,
			&i.ExpiresAt, &i.UpdatedAt, &i.BundleID, &i.BundlePos)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueuePoolSenderLive queues PoolSenderLive; its rows are appended to out.
func QueuePoolSenderLive(b *pgx.Batch, arg PoolSenderLiveParams, out *[]PoolSenderLiveRow) {
	b.Queue(poolSenderLive, arg.ChainID, arg.Sender, arg.ChainNonce).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i PoolSenderLiveRow
			if err := rows.Scan(&i.TxHash, &i.Nonce, &i.State, &i.GasFeeCap, &i.GasTipCap, &i.Gas, &i.ValueWei); err != nil {
				return err
			}
			*out = append(*out, i)
		}
		return rows.Err()
	})
}

// QueuePoolTxInsert queues PoolTxInsert; the rows it inserted are set into
// n.
func QueuePoolTxInsert(b *pgx.Batch, arg PoolTxInsertParams, n *int64) {
	b.Queue(poolTxInsert, arg.ChainID, arg.TxHash, arg.Sender, arg.Nonce, arg.TxType, arg.ToAddress, arg.GasFeeCap,
		arg.GasTipCap, arg.Gas, arg.ValueWei, arg.Raw, arg.State, arg.Now, arg.ExpiresAt).
		Exec(func(ct pgconn.CommandTag) error { *n = ct.RowsAffected(); return nil })
}

// QueuePoolSenderSetNext queues PoolSenderSetNext.
func QueuePoolSenderSetNext(b *pgx.Batch, arg PoolSenderSetNextParams) {
	b.Queue(poolSenderSetNext, arg.NextNonce, arg.Now, arg.ChainID, arg.Sender)
}

// QueuePoolSlotTake queues PoolSlotTake; found says whether it took a slot.
func QueuePoolSlotTake(b *pgx.Batch, arg PoolSlotTakeParams, found *bool) {
	b.Queue(poolSlotTake, arg.Pending, arg.Queued, arg.ChainID, arg.Start).QueryRow(func(row pgx.Row) error {
		var slot int16
		err := row.Scan(&slot)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueuePoolSlotTakeMany queues PoolSlotTakeMany; the slots it took are
// appended to out.
func QueuePoolSlotTakeMany(b *pgx.Batch, arg PoolSlotTakeManyParams, out *[]int16) {
	b.Queue(poolSlotTakeMany, arg.Pending, arg.Queued, arg.ChainID, arg.Start, arg.N).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var slot int16
			if err := rows.Scan(&slot); err != nil {
				return err
			}
			*out = append(*out, slot)
		}
		return rows.Err()
	})
}

// QueuePoolAdmissionBound queues PoolAdmissionBound; found says whether
// the chain's row was there.
func QueuePoolAdmissionBound(b *pgx.Batch, chainID int64, out *PoolAdmissionBoundRow, found *bool) {
	b.Queue(poolAdmissionBound, chainID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&out.PendingBase, &out.QueuedBase, &out.PendingGrowth, &out.QueuedGrowth)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueueNotify queues Notify.
func QueueNotify(b *pgx.Batch, arg NotifyParams) {
	b.Queue(notify, arg.Channel, arg.Payload)
}
