// Package monitor follows what was sent until the ledger gives a final
// answer, one file per lane, each named for it: BatchMonitor in batch.go
// (which also takes over the batches of a submitter whose lease expired;
// batch_follow.go holds the pending batches it follows in memory),
// BundleMonitor in bundle.go, and the wallet lane's steps and loops in
// wallet*.go (WalletConfirmer and WalletKeeper, steps of a wallet's run in
// its shard, see internal/wallet; WalletFollower and WalletHeadWatcher,
// loops that bring a wallet's shard back while the chain has work to
// finish). Beside them: the wallet lane's webhook outbox (webhook.go) and
// the retention of finished work (retention.go).
package monitor
