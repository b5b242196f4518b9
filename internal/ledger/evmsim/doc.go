// Package evmsim is a simulated EVM ledger for the wallet lane's fault tests:
// accounts with balances and nonces, a pool keyed by (sender, nonce) with
// geth's replacement rule, blocks, receipts, and fault rates (transient
// errors, lost responses, latency, lost transactions — taken, answered
// success, never mined — and reorgs that un-mine the last blocks, returning
// their transactions to the pool or dropping them, and mine new blocks with
// other hashes in their place; Reorg does one on demand, Stats counts them
// all). It answers with go-ethereum's error strings, so
// ledger.ClassifySendMessage reads it as it reads geth.
//
// It runs in-process (Ledger implements ledger.WalletLedger) or behind
// Ethereum JSON-RPC (NewServer), which go-ethereum's ethclient and so the evm
// adapter use unchanged.
//
// A run is deterministic for a given Config.Seed and call order: every random
// choice is drawn from one seeded source under the ledger's mutex, and time is
// the injected clock's. Blocks are produced lazily: every call first mines the
// blocks whose time (a multiple of Config.BlockPeriod after genesis) has come,
// so moving a clock.Fake forward and calling is enough; Mine produces a block
// on demand. Only Config.Latency is a real wait.
//
// No EVM code runs: a transaction transfers its value and pays
// intrinsic gas × its effective price. One whose data starts with RevertMarker
// (0xdeadbeef) is mined reverted: it uses its nonce and pays for gas but
// transfers nothing.
package evmsim
