// Package workers will hold the shard scheduler of DESIGN.md §2.4 (seed 002):
// per-key work such as a wallet's send-tx tasks, claimed as leased shards. No
// lane uses it yet; the wallet-lane work builds it.
package workers
