// Package failover holds ledgerq's PostgreSQL failover test: a
// pg_auto_failover formation (a monitor, a primary and a synchronous
// secondary on 127.0.0.1), `ledgerq serve` with every lane on, connected to
// both nodes with target_session_attrs=read-write, load on all three lanes,
// and the primary SIGKILLed again and again. The ledgers are the witnesses:
// the simulated Sawtooth ledger's log, a real geth's blocks and the
// simulated JAM chain's log must each hold every accepted item exactly once.
//
// It needs pg_auto_failover (Debian's postgresql-15-auto-failover and
// pg-auto-failover-cli), the PostgreSQL server binaries and geth
// (LEDGERQ_TEST_GETH); without them it is skipped (under CI=true it fails).
// It takes a few minutes, so `make test` leaves it out and `make
// failover-test` runs it (.ci/run does, as a step of its own).
// docs/operations.md ("High availability: failover") says how to run
// ledgerq this way and what the test measured.
package failover
