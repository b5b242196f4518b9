// Package faultproxy is an HTTP reverse proxy in front of one EVM node's
// JSON-RPC endpoint that fails the way hosted RPC providers fail, for tests
// and for trying ledgerq by hand (cmd/faultproxy): HTTP 429 with
// Retry-After, 502 and 503, a connection reset before the request is
// forwarded, a transaction forwarded whose answer is then lost (the node has
// it, the client never hears), an answer held longer than any sane client
// timeout, and a node a few blocks behind answering reads (an older head and
// nonce, no receipt yet for a transaction mined since).
//
// Each HTTP request draws at most one fault from Config's probabilities
// (one draw from a seeded math/rand source, so a run with one request at a
// time is repeatable); a JSON-RPC batch is one request, so an HTTP-level
// fault answers the whole batch and a lagging batch lags every element at
// the same head. Set changes the faults while the proxy runs; Stop and Start
// take the endpoint away and bring it back on the same port.
//
// It is our own code because no well-kept Go library injects faults that
// know JSON-RPC: toxiproxy and its kind cut, slow and corrupt TCP streams,
// which covers resets and slow answers but not a 429 with Retry-After on one
// method, a send whose answer alone is lost, or reads answered from an older
// block, which need the proxy to read and rewrite the JSON-RPC calls.
package faultproxy
