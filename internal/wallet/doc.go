// Package wallet is the wallet lane's core (docs/design.md, "The wallet
// lane"): the per-wallet work that signs, sends and follows send-tx tasks,
// one shard per (chain, address) run by the shard scheduler
// (internal/workers), so one worker at a time assigns a wallet's nonces
// while other wallets run in parallel.
//
// It holds what the lane's roles share, and no role's rules:
//
//   - Config, the lane's settings, with its one WithDefaults and Validate;
//   - Job, the wallet shard's workers.Job: a run's cycles in order, recover,
//     confirm (once per run), keep moving, send, and the in-flight budget
//     and send linger that decide what a send may take;
//   - Shard and Run, a claimed wallet as the steps see it and what its run
//     remembers between cycles;
//   - the operations on a claimed wallet that several roles need: fenced
//     commits (Shard.Fenced), outcome recording (Outcome, Result,
//     Shard.RecordResults), signing (Shard.SignRaw), broadcasts and receipt
//     lookups by nonce, each call under the lane's deadlines (DBCall,
//     LedgerCall, Within) and a cycle's Budget;
//   - what the process has seen of each chain (lagging.go): its best head
//     and each wallet's highest chain nonce read, so that no decision rests
//     on the answer of a node behind the others (Shard.ObserveHead,
//     Shard.TrustChainNonce), while a chain that truly went back is
//     followed after Config.RewindAfter.
//
// The role steps plug in through Steps: submitter.WalletBroadcaster
// (recover), monitor.WalletConfirmer (confirm), monitor.WalletKeeper (keep
// moving) and queuer.WalletSender (send), each built with the store, the
// ledger and the Config it uses, each beside the same role's rules for the
// other lanes. This package sits beneath them: it imports the scheduler, the
// store, the ledger interface, the keystore, metrics and the clock, never a
// role package; node wires the steps into a Job.
package wallet
