// Package eoa is the wallet lane's per-wallet worker (DESIGN.md §2.3, seed
// 003's EOA worker) as the job of the "wallet" shards of package workers
// (§2.4): one shard per (chain, address), so one worker at a time assigns a
// wallet's nonces while other wallets run in parallel.
//
// A run of a wallet's shard is a sequence of workers.Cycles, each collected
// from PostgreSQL, executed against the ledger with no database transaction
// open, and committed in one transaction fenced by the shard's claim
// (store.ShardFenced), so a worker whose lease was rescued writes nothing:
//
//   - recover: attempts signed and stored but not known sent are broadcast
//     in nonce order with their stored bytes. It runs after a crash and
//     after every send, whose write-ahead stores the attempts before any
//     broadcast: one path broadcasts in both cases.
//   - confirm, once per run: the chain's nonce (NonceAt, latest); receipts
//     of the sent attempts it passed (done, or done with reverted); a new
//     broadcast, same bytes, of sent attempts whose last broadcast was
//     indeterminate.
//   - Config.Stalls, once per run: the seam for gas bumps, no-ops and nonce
//     resets (the next issue). nil by default.
//   - send: waiting tasks in queue order up to the in-flight budget, fees
//     from SuggestFees, gas from the task or EstimateGas, signed by the
//     wallet's Signer with freed nonces first and then consecutive new ones
//     from the wallet's next nonce (the chain's nonce the first time, and
//     moved up to it when the chain passed it), and stored with the tasks' move to
//     executing in one fenced transaction (store.AttemptsStore) before
//     anything is broadcast. The recover cycle that follows broadcasts them.
//
// A collect with none of these to do now ends the run; the Follower
// schedules, every second, the shard of every configured wallet with
// attempts in flight or waiting tasks, so that confirm comes back while
// transactions are in flight.
//
// Send results (ledger.SendResultOf):
//
//   - accepted, `already known`: sent.
//   - indeterminate (timeouts, transport, unexplained errors): treated as
//     sent and never recycled; the attempt keeps the error, and each confirm
//     broadcasts it again with the same bytes until the node takes it or the
//     chain passes its nonce. Underpriced is kept the same way until the
//     next issue's bump.
//   - `nonce too low`: a success when one of our hashes for the nonce has a
//     receipt (a failed lookup: sent, confirm asks again). If none has and
//     the attempt was never broadcast before (stored by this run), another
//     transaction used the nonce: the attempt is dropped, its task goes back
//     to waiting — its transaction never ran and, a nonce being used once,
//     never will, so sending it again is what the client asked for — and
//     the next nonce moves up to the chain's. If it may have been broadcast
//     before (recover after a crash), confirm decides after ReplacedAfter.
//   - deterministic rejection: the task ends in error with the node's
//     reason and its attempt is dropped, freeing the nonce. The attempts of
//     the same cycle after it that were never broadcast are released (their
//     tasks wait again) and the next send fills the freed nonces, lowest
//     first, before taking new ones, so the chain never waits on a gap. A
//     freed nonce no task fills is the next issue's no-op.
//
// Confirm counts an attempt the chain passed as replaced (dropped, task back
// to waiting) only when every lookup of its hashes answered "no receipt" for
// Config.ReplacedAfter (default one minute); a failed lookup is "ask again
// later", never "absent" (DESIGN §7).
//
// The rules and the tests named after them:
//
//	all tasks done once, contiguous nonces, queue order    TestSeed003_TasksEndDoneOnceWithContiguousNoncesInQueueOrder
//	recover: crash after store, before broadcast            TestSeed003_RecoverAfterACrashBeforeBroadcastSendsTheStoredBytes
//	recover: crash after broadcast, before its record       TestSeed003_RecoverAfterACrashAfterBroadcastSendsNoSecondTransaction
//	confirm: crash after mining, before confirmation        TestSeed003_ConfirmAfterACrashBeforeConfirmationMarksDoneOnce
//	indeterminate is sent, never recycled (fault rates)     TestSeed003_UnderTransientAndLostResponseFaultsEveryTaskIsDoneOnceWithNoNonceSkippedOrUsedTwice
//	reverted is done, not error                             TestSeed003_ARevertedTransactionIsDoneWithReverted
//	deterministic rejection: error, nonce reused, no gap    TestSeed003_ARejectedTaskEndsInErrorAndItsNonceIsReusedSoTheChainHasNoGap
//	nonce too low without our receipt                       TestSeed003_NonceTooLowFromAnotherSenderRequeuesTheTaskAndRaisesTheNextNonce
//	replaced only when definitively absent                  TestSeed003_ReplacedOnlyWhenEveryLookupSaysAbsentForTheGraceNeverOnAFailedLookup
//	one transaction per nonce across processes              TestSeed003_TwoProcessesNeverSignTwoTransactionsForOneNonce
//	in-flight budget                                        TestSeed003_TheInFlightBudgetIsRespected
//	no spinning: nothing to do now ends the run             TestSeed003_ACollectWithNothingToDoNowEndsTheRun
//	failed work not retried forever (gas estimate)          TestSeed003_ATaskWhoseGasEstimateKeepsFailingEndsInErrorAfterMaxFailures
//	the shard comes back while attempts are in flight       TestFollower_SchedulesConfiguredWalletsWithAttemptsInFlightOrWaitingTasks
//	the services on their own loops, on the wall clock      TestSeed003_AStartedPoolAndFollowerFinishEveryTask
//	a cycle fits inside the lease (Config.CycleBudget)      TestSeed003_ACycleMakesNoLedgerCallPastItsBudget
package eoa
