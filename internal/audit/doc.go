// Package audit holds a wallet's record in the database against its chain's
// blocks: the wallet lane's exactly-once, checked from outside the lane.
// `ledgerq wallet audit` runs it for an operator, and the wallet lane's
// tests on a real geth judge their runs with it.
//
// The lane's rules (docs/design.md, the wallet lane) promise that every
// task is carried out by exactly one transaction, that a task is done only
// with the hash the chain mined for it, and that the wallet's nonces leave
// no hole the chain would wait on forever. The lane keeps those promises
// with its own reads of the chain, one nonce and one receipt at a time;
// this package checks them the way anyone else would, by reading every
// block of the range and every transaction the wallet's key signed in it:
//
//   - Every done task's hash is on the canonical chain, once, at the nonce
//     of its attempt; a done task with a hash no block holds is an
//     exception (the client was told done for a payment the chain lacks).
//     One that the chain holds in another block than the database
//     recorded is a notice (the lane follows such moves itself).
//   - Every transaction of the wallet on the chain is explained by an
//     attempt the database stored before it was broadcast (the
//     write-ahead): a task's first transaction at its nonce, a gas bump of
//     it, or a no-op (a 0-value transfer to itself). A transaction the
//     database does not hold, or one that the lane's restore recovery
//     recorded for no task and that is no no-op, is an exception: someone
//     else signed with the wallet's key, or the database forgot a task.
//   - No task has two transactions on the chain (it would have paid twice),
//     and no task the chain has carried out is still waiting (it would be
//     sent again) or in error (its client was told it failed).
//   - The nonces are contiguous: the chain's transactions of the wallet in
//     the range are one per nonce up to the chain's nonce (else the read
//     itself was incomplete), the database holds no nonce as mined twice,
//     and every nonce from the chain's nonce to the database's next nonce
//     is held by a live attempt (else the chain waits forever on the
//     hole).
//
// It reads the chain through ledger.WalletLedger (HeadBlock, NonceAt and
// TxsInBlock per block, a few blocks at once) and the database through the
// store's read-only queries; it changes nothing. The database is read
// before the chain, so that whatever it records as mined is in a block the
// read reaches; a transaction mined after that first read whose attempt was
// stored meanwhile is looked up again before it is called unexplained.
package audit
