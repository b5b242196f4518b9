// Package sawtooth speaks Hyperledger Sawtooth for the batch lane: it builds,
// parses and verifies signed batches the way Sawtooth clients and validators
// do, and its Client implements ledger.BatchLedger against Sawtooth's REST API
// (POST /batches, GET and POST /batch_statuses).
//
// A batch's id is its header_signature: the secp256k1 signature over the
// SHA-256 of the serialized BatchHeader, as 64 compact bytes (r‖s) in lower
// case hex. Public keys are compressed (33 bytes) in hex.
//
// Sawtooth takes or refuses a BatchList as a whole and does not say which batch
// made it refuse. The Client therefore bisects a refused list to find the
// batches the ledger refuses and still delivers the rest, so one bad batch of
// one service does not hold up the others sent alongside it.
package sawtooth
