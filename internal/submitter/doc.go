// Package submitter sends what the queuers released: one service per lane,
// each named for it (BatchSubmitter in batch.go). A submitter claims rows with
// SKIP LOCKED and a lease, calls the ledger with no database transaction open,
// and records each outcome with an update fenced by its claim.
package submitter
