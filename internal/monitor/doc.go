// Package monitor follows what was sent until the ledger gives a final answer:
// one service per lane, each named for it (BatchMonitor in batch.go), plus the
// recovery of work whose owner died (expired leases).
package monitor
