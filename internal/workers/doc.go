// Package workers is the shard scheduler (docs/design.md, "Shards"): per-key
// work, such as a wallet's send-tx tasks, kept in ledgerq.shards and run by
// the Scheduler's workers, one worker per shard at a time, each a loop like
// every other service. It knows no lane: a lane plugs in a Job for its kind
// of shard (the wallet lane's is wallet.Job, in internal/wallet).
//
// A shard is keyed "<kind>:<rest>" (wallet:<chain>:<address>); the kind picks
// the Job that runs it. Schedule moves an idle shard to pending (FIFO by the
// time it was scheduled) and wakes the workers; a worker claims the oldest
// pending shard under a lease and runs its job's cycles — collect, execute,
// commit (which removes the executed work) — until a collect finds nothing
// or the quantum is spent, then releases it in one owner-checked UPDATE:
// pending when work may be left or a schedule landed during the run
// (more_work), else idle. The Rescuer puts running shards whose holder is
// gone back to pending: at once when the holder's process died (its
// liveness lock, recorded by the claim, is no longer held), else when the
// lease expired; the late writes of their old worker are fenced by the
// claim's owner and run number and change nothing.
//
// A failed run waits a backoff that doubles with each consecutive failed
// run (Config.Backoff up to Config.MaxBackoff), except when its error is
// marked Unavailable: the ledger did not answer, which says nothing about
// the work, so the run counts as no failure and waits at most
// Config.UnavailableBackoff, honouring the ledger's hint within it.
//
// The scheduler's rules and the tests named after them:
//
//	scheduling: idle → pending atomically, no-op on pending   TestScheduler_Scheduling*
//	workers claim FIFO, run a cycle loop, re-schedule or idle  TestScheduler_Worker*
//	empty collect ends the run at once                        TestScheduler_ExecutionLoop*
//	failed work is still removed; never retried forever       TestScheduler_ErrorHandling*
//	an unavailable ledger: a short wait, no failure counted    TestScheduler_ErrorHandlingAnUnavailableLedger*
//	time quantum: a backlog yields, other shards run          TestScheduler_TimeQuantum*
//	mutual exclusion (with leases and fencing across processes) TestScheduler_Concurrency*
//	shutdown: stop claiming, finish the cycle, release, join  TestScheduler_Shutdown*
package workers
