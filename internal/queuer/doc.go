// Package queuer decides what may be sent now: one service per lane, each
// named for it (BatchQueuer in batch.go). A queuer never talks to a ledger; it
// moves rows to the state in which a submitter may claim them, in one
// statement, and wakes that lane's submitter.
package queuer
