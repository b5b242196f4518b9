-- +goose Up
-- Comments that say what each rule is. Some earlier comments named a rule
-- by the number of an internal document that operators reading them with \d+
-- do not have; these say the same in ledgerq's own words (docs/design.md,
-- "Where the rules come from", names each rule's source). Comments only: no
-- table, type or row changes. The tx_attempt_state comment also lists mined,
-- the value 00019 added, which its old text left out.

COMMENT ON TYPE ledgerq.batch_status IS 'Batch status: pending (the ledger has it), unknown (the ledger did not know it), delayed (a transient failure; sent again after the delay window), committed, valid, invalid (final). NULL in batches.status: not sent yet.';
COMMENT ON TABLE ledgerq.batches IS 'Batch lane: the state of each signed ledger batch, keyed by seq; batches are sent one at a time per service_id in created_at order, ties broken by id (in batch_payloads).';
COMMENT ON COLUMN ledgerq.batches.queued_at IS 'Set when the batch is admitted (queued now: the submitter may claim it); cleared when the submitter claims it.';
COMMENT ON COLUMN ledgerq.batches.status IS 'Batch status (batch_status); NULL: never sent. committed, valid and invalid are terminal.';
COMMENT ON COLUMN ledgerq.batches.submitted IS 'Submitted flag: true while the submitter holds the batch (status NULL, unknown or delayed, with a claim lease) and once it has reached the ledger (pending and after).';
COMMENT ON INDEX ledgerq.batches_active_by_service IS 'Services with an active batch: queued, held, pending, unknown or delayed. At most one per service (a service''s batches reach the ledger one at a time); admission reads it.';
COMMENT ON INDEX ledgerq.batches_new_by_service IS 'Never-sent batches of each service, oldest first: admission (which queues the oldest batch of each idle service) and the reconciliation scan read it.';

COMMENT ON TABLE ledgerq.pool_txs IS 'Builder lane transaction pool: one row per transaction received, kept in every state (nothing is deleted silently).';
COMMENT ON COLUMN ledgerq.pool_txs.expires_at IS 'received_at + the pool''s TTL (--pool-ttl, 1 h by default): a transaction still pending or queued then is dropped as expired by the sweep.';
COMMENT ON TABLE ledgerq.pool_senders IS 'Builder lane: one row per sender the pool has seen. Its row lock is the sender''s intake lock: every intake and sweep of a sender''s transactions holds it, so the pool''s nonce-order rules and the per-sender limit stay exact across processes.';
COMMENT ON TYPE ledgerq.bundle_state IS 'Bundle state: queued (waiting for a core), submitted (a version is with the guarantors; holds a core), guaranteed (a version is in a block''s E_G; core free), accumulated (in E_A: executed), finalized (accumulated finality-depth slots ago), dropped (given up: drop_reason; its transactions went back to pending).';
COMMENT ON TABLE ledgerq.bundles IS 'Builder lane bundles: one row per EVM block cut from the pool, kept in every state. A dropped number is cut again as a new row.';
COMMENT ON COLUMN ledgerq.bundles.version IS 'Submission round: 1 first; a guarantee timeout requeues with version + 1 (a version above 1 is always rebuilt on a fresh anchor).';
COMMENT ON TABLE ledgerq.bundle_versions IS 'Builder lane: every work package claimed for submission, one row per package hash (every version''s hash is kept, so that a guarantee of any version is recognised in E_G). The same package claimed again (same version, core and anchor after a refusal) is the same row.';

COMMENT ON TYPE ledgerq.shard_state IS 'Shard state: idle (dormant), pending (in the queue), running (a worker holds it under a lease).';
COMMENT ON TABLE ledgerq.shards IS 'Shard scheduler: one row per key whose work one worker at a time runs, claimed oldest pending first under a lease.';

COMMENT ON TABLE ledgerq.wallet_tasks IS 'Wallet lane: send-tx tasks, one transaction each, sent from their wallet''s address by the wallet''s shard in queue order.';
COMMENT ON COLUMN ledgerq.wallet_task_overview.status IS 'waiting, executing, error or done (status codes 0 to 3).';
COMMENT ON TYPE ledgerq.tx_attempt_state IS 'Transaction attempt: signed (stored before it is broadcast, not known to be broadcast), sent (broadcast, or its outcome was indeterminate), mined (has a receipt, not yet deep enough to be final), confirmed (final), dropped (will never be mined: refused, replaced, or superseded by a gas bump).';
COMMENT ON TABLE ledgerq.tx_attempts IS 'Wallet lane write-ahead log: every transaction ledgerq signed, stored with its nonce and raw bytes before it is broadcast.';
COMMENT ON TABLE ledgerq.wallet_nonces IS 'Wallet lane: the next nonce ledgerq will sign with, per (chain, sender), counted optimistically: it counts the transactions ledgerq signed that the chain has not mined yet.';
COMMENT ON TABLE ledgerq.wallet_health IS 'Wallet lane: per (chain, sender) health: when the chain''s nonce last moved, the balance and the threshold below which sending pauses, and the last nonce reset.';

-- +goose Down
-- The comments as 00022 left them (their references to internal documents since
-- reworded in the earlier migrations themselves).
COMMENT ON INDEX ledgerq.batches_active_by_service IS 'Services with an active batch: queued, held, pending, unknown or delayed. At most one per service; admission reads it.';
COMMENT ON INDEX ledgerq.batches_new_by_service IS 'Never-sent batches of each service, oldest first: admission (which queues the oldest batch of each idle service) and the reconciliation scan read it.';
COMMENT ON TABLE ledgerq.batches IS 'Batch lane: the state of each signed ledger batch, keyed by seq; batches are sent one at a time per service_id in created_at order, ties broken by id (in batch_payloads).';
COMMENT ON TABLE ledgerq.bundle_versions IS 'Builder lane: every work package claimed for submission, one row per package hash (every version''s hash is kept, to match E_G). The same package claimed again (same version, core and anchor after a refusal) is the same row.';
COMMENT ON TABLE ledgerq.bundles IS 'Builder lane bundles: one row per EVM block cut from the pool, kept in every state. A dropped number is cut again as a new row.';
COMMENT ON TABLE ledgerq.pool_senders IS 'Builder lane: one row per sender the pool has seen. Its row lock is the sender''s intake lock: every intake and sweep of a sender''s transactions holds it, so the pool''s nonce-order rules and the per-sender limit stay exact across processes.';
COMMENT ON TABLE ledgerq.pool_txs IS 'Builder lane transaction pool: one row per transaction received, kept in every state (nothing is deleted silently).';
COMMENT ON TABLE ledgerq.shards IS 'Shard scheduler: one row per key whose work one worker at a time runs, claimed oldest pending first under a lease.';
COMMENT ON TABLE ledgerq.tx_attempts IS 'Wallet lane write-ahead log: every transaction ledgerq signed, stored with its nonce and raw bytes before it is broadcast.';
COMMENT ON TABLE ledgerq.wallet_health IS 'Wallet lane: per (chain, sender) health: when the chain''s nonce last moved, the balance and the threshold below which sending pauses, and the last nonce reset.';
COMMENT ON TABLE ledgerq.wallet_nonces IS 'Wallet lane: the next nonce ledgerq will sign with, per (chain, sender), counted optimistically.';
COMMENT ON TABLE ledgerq.wallet_tasks IS 'Wallet lane: send-tx tasks, one transaction each, sent from their wallet''s address by the wallet''s shard in queue order.';
COMMENT ON COLUMN ledgerq.batches.queued_at IS 'Set by the queuer when the batch is admitted (queued now); cleared when the submitter claims it.';
COMMENT ON COLUMN ledgerq.batches.status IS 'Batch status (batch_status); NULL is None (never sent). committed, valid and invalid are terminal.';
COMMENT ON COLUMN ledgerq.batches.submitted IS 'Submitted flag: true while the submitter holds the batch (status NULL, unknown or delayed, with a claim lease) and once it has reached the ledger (pending and after).';
COMMENT ON COLUMN ledgerq.bundles.version IS 'Submission round: 1 first; a guarantee timeout requeues with version + 1 (a version above 1 is always rebuilt on a fresh anchor).';
COMMENT ON COLUMN ledgerq.pool_txs.expires_at IS 'received_at + TTL (1 h by default): a transaction still pending or queued then is dropped as expired by the sweep.';
COMMENT ON TYPE ledgerq.batch_status IS 'Batch status. NULL in batches.status: not sent yet.';
COMMENT ON TYPE ledgerq.bundle_state IS 'Bundle: queued (waiting for a core), submitted (a version is with the guarantors; holds a core), guaranteed (a version is in a block''s E_G; core free), accumulated (in E_A: executed), finalized (accumulated finality-depth slots ago), dropped (given up: drop_reason; its transactions went back to pending).';
COMMENT ON TYPE ledgerq.shard_state IS 'Shard state: idle (dormant), pending (in the queue), running (a worker holds it under a lease).';
COMMENT ON TYPE ledgerq.tx_attempt_state IS 'Transaction attempt: signed (stored, not known to be broadcast), sent (broadcast, or its outcome was indeterminate), confirmed (mined), dropped (will never be mined: its nonce is free again).';
COMMENT ON COLUMN ledgerq.wallet_task_overview.status IS 'waiting, executing, error or done (status codes 0 to 3).';
