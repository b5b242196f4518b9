// Package submitter sends what the queuers released: one file per lane,
// each named for it. The batch and builder lanes' submitters (BatchSubmitter
// in batch.go, BundleSubmitter in bundle.go) are loops that claim rows with
// SKIP LOCKED and a lease. The wallet lane's (WalletBroadcaster in
// wallet.go) is a step of a wallet's run, under the claim of the wallet's
// shard (internal/wallet). Each calls the ledger with no database
// transaction open and records each outcome with an update fenced by its
// claim.
package submitter
