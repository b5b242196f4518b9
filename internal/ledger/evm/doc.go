// Package evm is the wallet lane's adapter to an Ethereum JSON-RPC node
// (geth, or anything that answers like it) through go-ethereum's ethclient.
// It implements ledger.WalletLedger.
//
// Sends are classified by the node's code and message, for geth, reth,
// anvil, Erigon, Nethermind and Besu (ledger.ClassifySend, docs/clients.md):
// only an answer the node wrote itself — a JSON-RPC error object — can say
// that a transaction was refused and its nonce may be recycled. A rate limit
// (an HTTP 429, a provider's "limit exceeded") or a full pool is
// ledger.SendBusy. Everything else (a timeout, a cut connection, an HTTP 5xx
// from a proxy, an error with no known phrase) is ledger.SendIndeterminate:
// the transaction may be out.
package evm
