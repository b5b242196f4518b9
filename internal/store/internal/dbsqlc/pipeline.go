package dbsqlc

// Not generated: queues some of this package's queries on a pgx.Batch, so
// that the statements of one transaction reach the server in one round trip
// (a batch sent outside a transaction runs as one implicit transaction).
// Each reads its rows into the generated row type, as the generated method
// does; sqlc diff ignores this file.

import "github.com/jackc/pgx/v5"

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
