// Package sim is the simulated ledger: ledgerq's embedded default and its test
// double. It runs in-process (Ledger implements the ledger interfaces) or
// behind the same wire protocols as the real adapters (NewServer serves
// Sawtooth's REST API), so the real sawtooth.Client can be tested against it.
//
// A run is deterministic for a given Config.Seed and call order: every random
// choice (a transient failure, a dropped response, a batch's fate) is drawn
// from one seeded source under the ledger's mutex, and time is the injected
// clock's. Only Config.Latency is a real wait.
//
// Everything the ledger does is written to an ordered event log (Events) with
// the clock time, and counted (Stats), so tests and end-to-end checks can see
// exactly what the ledger received and decided.
//
// Lanes: the batch lane (Sawtooth-shaped batches, statuses COMMITTED, INVALID,
// PENDING and UNKNOWN) is in batch.go; other lanes add their own state to
// Ledger and their own routes to NewServer.
package sim
