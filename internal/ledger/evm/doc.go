// Package evm is the wallet lane's adapter to an Ethereum JSON-RPC node
// (geth, or anything that answers like it) through go-ethereum's ethclient.
// It implements ledger.WalletLedger.
//
// Sends are classified by the node's message (ledger.ClassifySendMessage):
// only an answer the node wrote itself — a JSON-RPC error object — can say
// that a transaction was refused and its nonce may be recycled. Everything
// else (a timeout, a cut connection, an HTTP 5xx from a proxy, an error with
// no known phrase) is ledger.SendIndeterminate: the transaction may be out.
package evm
