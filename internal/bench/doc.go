// Package bench generates load against ledgerq and measures it. It is the
// engine behind `ledgerq bench`.
//
// The batch-lane workload (RunBatches) runs ledgerq as `serve` would — the
// real queuer, submitter and monitor, woken by LISTEN/NOTIFY through a
// notify.Listener and talking to the in-process simulated ledger — while
// ingest workers store pre-signed Sawtooth batches with store.InsertBatches,
// the path the HTTP API takes minus HTTP. Signing costs about 110 µs a batch,
// so a Workload is built before the clock starts.
//
// Every figure in the summary is computed from the database rows of the run
// at its end: latency is finished_at − received_at of each committed batch,
// and end-to-end throughput counts from the first received_at to the last
// finished_at. A run's batches are recognised by their service ids, which all
// start with the run's prefix, so a run can share a database with earlier ones
// (though their unfinished batches compete for the loops).
package bench
