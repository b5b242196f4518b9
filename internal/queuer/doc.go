// Package queuer decides what may be sent now, one file per lane, each
// named for it. A queuer never sends: it moves work to the state in which
// the same lane's submitter takes it, and wakes that submitter.
//
//   - batch.go, BatchQueuer: the batch lane's loop; it queues batches in one
//     statement and never talks to a ledger.
//   - bundle_intake.go, PoolIntake: the builder lane's pool admission rules;
//     bundle.go, Bundler: the loop that cuts the pool's pending
//     transactions into bundles, reading the chain's head and recent blocks
//     to number them.
//   - wallet.go, WalletSender: the wallet lane's send step, run in a
//     wallet's shard (internal/wallet): it assigns nonces and signs, so it
//     asks the node for the fee suggestion and the gas estimates a
//     transaction is signed with, and stores the attempts (the write-ahead)
//     before the submitter's step broadcasts them.
package queuer
