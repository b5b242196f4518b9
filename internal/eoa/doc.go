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
//   - keep moving, once per run each (stall.go): reconcile the next nonce
//     with the chain's (a reset when it is below the chain's, or more than
//     Config.ResetGap above it with nothing in flight, recorded on the
//     wallet's health row; freed nonces above the highest live attempt are
//     discarded); a gas bump of a nonce stalled for Config.StallTimeout
//     (fee cap and tip max(previous × 1.2, the suggestion), within
//     Config.PriceCap, stored as a new attempt superseding the old before
//     it is broadcast; underpriced: again at the next run; at the cap: the
//     task stays, PriceCappedAt and Config.OnPriceCapped tell the
//     operator), or a no-op (0-value transfer to self, an attempt of no
//     task) if no attempt holds the stalled nonce; the balance, read when
//     missing or older than Config.BalanceMaxAge (below the threshold,
//     which insufficient-funds refusals raise to the refused fees, the run
//     sends nothing); no-ops for freed nonces no waiting task fills (or
//     more than Config.MaxRecycled of them).
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
//     chain passes its nonce. Underpriced is kept the same way; once
//     its nonce has stalled, the next run bumps it.
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
//     freed nonce no task fills gets a no-op. A refused gas bump does not
//     fail its task (the attempt it superseded may still be mined).
//
// Confirm looks up every hash of a nonce (the attempt's and those of the gas
// bumps it superseded): any one mined makes the task done with that hash.
// It counts an attempt the chain passed as replaced only when every lookup
// of those hashes answered "no receipt" for Config.ReplacedAfter (default
// one minute); a failed lookup is "ask again later", never "absent" (DESIGN
// §7). A replaced task goes back to waiting at most Config.MaxReplacements
// times (default 3, counted on the task), then ends in error.
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
//	stall: bump until mined, count on the task             TestSeed003_AStalledNonceIsBumpedUntilMinedWithTheBumpCountOnTheTask
//	stall: the price cap stops a bump, operator told       TestSeed003_ABumpStoppedByThePriceCapLeavesTheTaskAndTellsTheOperator
//	stall: underpriced bump raised again next run          TestSeed003_ABumpRefusedAsUnderpricedIsRaisedAgainInTheNextRun
//	any mined hash of a nonce is done                      TestSeed003_AnyMinedHashOfANonceMakesItsTaskDoneNotReplaced
//	transport never frees; freed nonce gets a no-op        TestSeed003_ATransportErrorNeverFreesANonceAndAFreedNonceNoTaskFillsGetsANoop
//	freed nonces above the highest live are discarded      TestSeed003_FreedNoncesAboveTheHighestLiveAttemptAreDiscarded
//	nonce reset, recorded                                  TestSeed003_ANextNonceThatCannotHealIsResetToTheChainsAndRecorded
//	balance health pauses sending                          TestSeed003_SendingPausesBelowTheBalanceThresholdUntilTheBalanceRecovers
//	replacement limit                                      TestSeed003_AReplacedTaskGoesBackToWaitingAtMostMaxReplacementsTimes
//	replaced only when every hash, bumps included, absent  TestSeed003_ReplacedOnlyWhenEveryHashOfTheNonceBumpsIncludedIsDefinitivelyAbsent
//	more freed nonces than MaxRecycled: no-ops at once     TestSeed003_MoreFreedNoncesThanMaxRecycledAreFilledWithNoops
//	real geth, stalling miner: bumped until mined          TestSeed003_OnAStallingGethLowTipTasksAreBumpedUntilMined
package eoa
