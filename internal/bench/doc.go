// Package bench generates load against ledgerq and measures it. It is the
// engine behind `ledgerq bench`.
//
// The batch-lane workload (RunBatches) runs ledgerq as `serve` would — the
// real queuer, submitter and monitor, woken by LISTEN/NOTIFY through a
// notify.Listener and talking to the in-process simulated ledger — and feeds
// it pre-signed Sawtooth batches in one of three modes:
//
//   - ModeE2E: ingest workers store the batches with store.BatchInsert, the
//     path the HTTP API takes minus HTTP, while the loops run.
//   - ModePreload: the same ingest stores every batch with the loops stopped;
//     then the loops start and the run is timed from their start to the last
//     commit. This is how River's benchmark (river bench --num-total-jobs)
//     measures a queue working down a backlog, so the two can be compared.
//   - ModeHTTP: HTTP clients post the batches as JSON arrays to the node's
//     real API handler on a loopback listener while the loops run, so intake
//     pays what a client's request pays: JSON, base64 and the API's signature
//     checks.
//
// Signing costs about 110 µs a batch and encoding the HTTP bodies is the
// client's work, so both happen before the clock starts. The simulated ledger
// verifies signatures too unless Node.Batch.Ledger.Sim.SkipVerify is set (the
// ledger's cost, paid on its own machines in production); the summary says
// which.
//
// Every figure in the summary is computed from the database rows of the run
// at its end: latency is finished_at − received_at of each committed batch,
// and end-to-end throughput counts from the first received_at to the last
// finished_at; ModePreload's processing figures count from the loops' start
// instead. A run's batches are recognised by their service ids, which all
// start with the run's prefix, so a run can share a database with earlier ones
// (though their unfinished batches compete for the loops).
package bench
