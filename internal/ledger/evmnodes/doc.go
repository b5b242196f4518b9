// Package evmnodes is one EVM chain behind several nodes of any client: the
// wallet lane's ledger.WalletLedger when a chain is declared with its nodes
// (docs/design.md, "Chains and nodes"). It health-checks each node (its
// chain id, head, lag behind the best, errors and latency), reads from a
// healthy node at the highest head seen, broadcasts the same signed bytes
// to every healthy node and to send-only endpoints, backs a node off on a
// rate limit or a 5xx (honouring Retry-After), and never answers a read
// from a node behind the highest head it has seen, so that no decision of
// the lane rests on a lagging node's word.
package evmnodes
