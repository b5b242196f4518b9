-- +goose Up
-- Builder lane, bundles (jamduna's EVM builder's bundle queue): pending pool
-- transactions are cut into EVM blocks ("bundles") with consecutive numbers,
-- each submitted to a JAM core as a work package, one version at a time,
-- until a version is guaranteed, then accumulated (executed), then final.
-- Lock order, in every transaction that takes more than one of them:
-- builder_chains → cores → bundles → bundle_versions → pool_txs.

CREATE TABLE ledgerq.builder_chains (
    chain_id       bigint      NOT NULL PRIMARY KEY,
    processed_slot bigint,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,

    CONSTRAINT builder_chains_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT builder_chains_processed_slot_not_negative CHECK (processed_slot IS NULL OR processed_slot >= 0),
    CONSTRAINT builder_chains_times_finite CHECK (isfinite(created_at) AND isfinite(updated_at))
);

COMMENT ON TABLE ledgerq.builder_chains IS 'Builder lane: one row per chain the bundler serves. Its row lock (FOR UPDATE) serializes what changes the chain''s line of bundle numbers (cutting, dropping) and the monitor''s reading of JAM blocks.';
COMMENT ON COLUMN ledgerq.builder_chains.chain_id IS 'EVM chain id (as pool_txs.chain_id).';
COMMENT ON COLUMN ledgerq.builder_chains.processed_slot IS 'Timeslot of the last JAM block whose guarantees and accumulations were applied; NULL before the first. Blocks are applied in slot order, each once.';
COMMENT ON COLUMN ledgerq.builder_chains.created_at IS 'When the chain''s first bundle was cut or first block read.';
COMMENT ON COLUMN ledgerq.builder_chains.updated_at IS 'Last change to the row.';

CREATE TYPE ledgerq.bundle_state AS ENUM ('queued', 'submitted', 'guaranteed', 'accumulated', 'finalized', 'dropped');
COMMENT ON TYPE ledgerq.bundle_state IS 'Bundle: queued (waiting for a core), submitted (a version is with the guarantors; holds a core), guaranteed (a version is in a block''s E_G; core free), accumulated (in E_A: executed), finalized (accumulated finality-depth slots ago), dropped (given up: drop_reason; its transactions went back to pending).';

CREATE TABLE ledgerq.bundles (
    id                 bigint               GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id           bigint               NOT NULL REFERENCES ledgerq.builder_chains (chain_id),
    number             bigint               NOT NULL,
    parent             text                 NOT NULL,
    hash               text                 NOT NULL,
    state              ledgerq.bundle_state NOT NULL,
    version            integer              NOT NULL,
    core               integer,
    anchor_slot        bigint,
    anchor_hash        text,
    guaranteed_hash    text,
    guaranteed_version integer,
    accumulated_slot   bigint,
    submit_failures    integer              NOT NULL DEFAULT 0,
    next_submit_at     timestamptz          NOT NULL,
    drop_reason        text,
    tx_count           integer              NOT NULL,
    created_at         timestamptz          NOT NULL,
    submitted_at       timestamptz,
    guaranteed_at      timestamptz,
    accumulated_at     timestamptz,
    finalized_at       timestamptz,
    updated_at         timestamptz          NOT NULL,

    CONSTRAINT bundles_number_positive CHECK (number > 0),
    CONSTRAINT bundles_hashes_format CHECK (parent ~ '^0x[0-9a-f]{64}$' AND hash ~ '^0x[0-9a-f]{64}$'),
    CONSTRAINT bundles_version_positive CHECK (version >= 1),
    CONSTRAINT bundles_tx_count_positive CHECK (tx_count >= 1),
    CONSTRAINT bundles_submit_failures_not_negative CHECK (submit_failures >= 0),
    -- Only a submitted bundle holds a core (jamduna's bundle queue: "core
    -- blocked" only while submitted).
    CONSTRAINT bundles_core_iff_submitted CHECK ((core IS NOT NULL) = (state = 'submitted')),
    CONSTRAINT bundles_core_not_negative CHECK (core IS NULL OR core >= 0),
    CONSTRAINT bundles_submitted_has_time CHECK (state <> 'submitted' OR submitted_at IS NOT NULL),
    CONSTRAINT bundles_anchor_whole CHECK ((anchor_slot IS NULL) = (anchor_hash IS NULL)),
    CONSTRAINT bundles_anchor_format CHECK (
        anchor_slot IS NULL OR (anchor_slot >= 0 AND anchor_hash ~ '^0x[0-9a-f]{64}$')
    ),
    CONSTRAINT bundles_submitted_has_anchor CHECK (state <> 'submitted' OR anchor_slot IS NOT NULL),
    -- The first guarantee wins and is kept: the three are set together,
    -- once. Queued and submitted bundles have none (jamduna's race: a
    -- bundle with a guaranteed version is never queued or submitted again).
    CONSTRAINT bundles_guarantee_whole CHECK (
        (guaranteed_hash IS NULL) = (guaranteed_version IS NULL) AND (guaranteed_hash IS NULL) = (guaranteed_at IS NULL)
    ),
    CONSTRAINT bundles_guarantee_format CHECK (
        guaranteed_hash IS NULL OR (guaranteed_hash ~ '^0x[0-9a-f]{64}$' AND guaranteed_version BETWEEN 1 AND version)
    ),
    CONSTRAINT bundles_guarantee_by_state CHECK (
        CASE state
            WHEN 'queued' THEN guaranteed_hash IS NULL
            WHEN 'submitted' THEN guaranteed_hash IS NULL
            WHEN 'dropped' THEN true
            ELSE guaranteed_hash IS NOT NULL
        END
    ),
    CONSTRAINT bundles_accumulated_iff_state CHECK (
        (accumulated_slot IS NOT NULL) = (state IN ('accumulated', 'finalized'))
        AND (accumulated_at IS NOT NULL) = (state IN ('accumulated', 'finalized'))
        AND (accumulated_slot IS NULL OR accumulated_slot >= 0)
    ),
    CONSTRAINT bundles_finalized_iff_state CHECK ((finalized_at IS NOT NULL) = (state = 'finalized')),
    CONSTRAINT bundles_dropped_iff_reason CHECK ((drop_reason IS NOT NULL) = (state = 'dropped')),
    CONSTRAINT bundles_drop_reason_not_empty CHECK (drop_reason IS NULL OR (drop_reason <> '' AND length(drop_reason) <= 256)),
    CONSTRAINT bundles_times_finite CHECK (
        isfinite(next_submit_at) AND isfinite(created_at) AND isfinite(updated_at)
        AND (submitted_at IS NULL OR isfinite(submitted_at)) AND (guaranteed_at IS NULL OR isfinite(guaranteed_at))
        AND (accumulated_at IS NULL OR isfinite(accumulated_at)) AND (finalized_at IS NULL OR isfinite(finalized_at))
    )
);

COMMENT ON TABLE ledgerq.bundles IS 'Builder lane bundles: one row per EVM block cut from the pool, kept in every state. A dropped number is cut again as a new row.';
COMMENT ON COLUMN ledgerq.bundles.id IS 'Surrogate key (pool_txs.bundle_id, bundle_versions.bundle_id, cores.bundle_id point at it).';
COMMENT ON COLUMN ledgerq.bundles.chain_id IS 'EVM chain id.';
COMMENT ON COLUMN ledgerq.bundles.number IS 'EVM block number: consecutive per chain, the builder service executes them strictly in order. At most one live (not dropped) bundle per (chain_id, number).';
COMMENT ON COLUMN ledgerq.bundles.parent IS 'Hash of the bundle numbered number - 1 (or of the chain''s executed block), 0x-hex.';
COMMENT ON COLUMN ledgerq.bundles.hash IS 'The block''s hash, ledger.BundleHash(parent, number, its transactions'' hashes in order); the same for every version.';
COMMENT ON COLUMN ledgerq.bundles.state IS 'queued, submitted, guaranteed, accumulated, finalized or dropped.';
COMMENT ON COLUMN ledgerq.bundles.version IS 'Submission round: 1 first; a guarantee timeout requeues with version + 1 (a version above 1 is always rebuilt on a fresh anchor).';
COMMENT ON COLUMN ledgerq.bundles.core IS 'State submitted: the core the current version was submitted for (cores.bundle_id points back). NULL otherwise.';
COMMENT ON COLUMN ledgerq.bundles.anchor_slot IS 'Timeslot of the JAM block the next (queued) or current (submitted) version is built on; NULL forces a rebuild on a fresh anchor at the next claim.';
COMMENT ON COLUMN ledgerq.bundles.anchor_hash IS 'Header hash of that anchor block, 0x-hex; NULL with anchor_slot.';
COMMENT ON COLUMN ledgerq.bundles.guaranteed_hash IS 'Work-package hash of the first version seen guaranteed (E_G); set once, never overwritten: later guarantees of other versions are ignored.';
COMMENT ON COLUMN ledgerq.bundles.guaranteed_version IS 'Version of that package.';
COMMENT ON COLUMN ledgerq.bundles.accumulated_slot IS 'States accumulated and finalized: timeslot of the block whose E_A carried it.';
COMMENT ON COLUMN ledgerq.bundles.submit_failures IS 'Submissions refused (transient or deterministic) so far: the backoff doubles with each.';
COMMENT ON COLUMN ledgerq.bundles.next_submit_at IS 'A queued bundle is not claimed before it (the backoff after a refused submission).';
COMMENT ON COLUMN ledgerq.bundles.drop_reason IS 'State dropped: why (no guarantee after N versions; predecessor N dropped).';
COMMENT ON COLUMN ledgerq.bundles.tx_count IS 'Number of transactions cut into it.';
COMMENT ON COLUMN ledgerq.bundles.created_at IS 'When it was cut.';
COMMENT ON COLUMN ledgerq.bundles.submitted_at IS 'When its latest version was claimed for submission (the guarantee timeout counts from it); NULL before the first.';
COMMENT ON COLUMN ledgerq.bundles.guaranteed_at IS 'When the first guarantee was applied.';
COMMENT ON COLUMN ledgerq.bundles.accumulated_at IS 'When the accumulation was applied.';
COMMENT ON COLUMN ledgerq.bundles.finalized_at IS 'When it became final.';
COMMENT ON COLUMN ledgerq.bundles.updated_at IS 'Last change to the row.';

-- One live bundle per number; also the cut's read of the highest live number.
CREATE UNIQUE INDEX bundles_live_number ON ledgerq.bundles (chain_id, number) WHERE state <> 'dropped';
-- Reads by number (a dropped one included) and the list.
CREATE INDEX bundles_number ON ledgerq.bundles (chain_id, number);
-- The claim (lowest number first) and the count of the queue.
CREATE INDEX bundles_queued ON ledgerq.bundles (chain_id, number) WHERE state = 'queued';
-- The drop's cascade: the live bundles that have not executed.
CREATE INDEX bundles_unexecuted ON ledgerq.bundles (chain_id, number) WHERE state IN ('queued', 'submitted', 'guaranteed');
-- The guarantee timeout.
CREATE INDEX bundles_submitted ON ledgerq.bundles (chain_id, submitted_at) WHERE state = 'submitted';
-- Finality.
CREATE INDEX bundles_accumulated ON ledgerq.bundles (chain_id, accumulated_slot) WHERE state = 'accumulated';

CREATE TABLE ledgerq.bundle_versions (
    package_hash    text        NOT NULL PRIMARY KEY,
    bundle_id       bigint      NOT NULL REFERENCES ledgerq.bundles (id),
    version         integer     NOT NULL,
    core            integer     NOT NULL,
    anchor_slot     bigint      NOT NULL,
    anchor_hash     text        NOT NULL,
    submitted_at    timestamptz NOT NULL,
    outcome         text,
    guaranteed_slot bigint,

    CONSTRAINT bundle_versions_hash_format CHECK (package_hash ~ '^0x[0-9a-f]{64}$' AND anchor_hash ~ '^0x[0-9a-f]{64}$'),
    CONSTRAINT bundle_versions_numbers CHECK (version >= 1 AND core >= 0 AND anchor_slot >= 0 AND (guaranteed_slot IS NULL OR guaranteed_slot >= 0)),
    CONSTRAINT bundle_versions_outcome_known CHECK (
        outcome IS NULL OR outcome IN ('sent', 'unknown') OR (outcome LIKE 'refused: %' AND length(outcome) <= 300)
    ),
    CONSTRAINT bundle_versions_times_finite CHECK (isfinite(submitted_at))
);

COMMENT ON TABLE ledgerq.bundle_versions IS 'Builder lane: every work package claimed for submission, one row per package hash (every version''s hash is kept, to match E_G). The same package claimed again (same version, core and anchor after a refusal) is the same row.';
COMMENT ON COLUMN ledgerq.bundle_versions.package_hash IS 'ledger.PackageHash(bundle hash, version, core, anchor), 0x-hex: what guarantees and accumulations name.';
COMMENT ON COLUMN ledgerq.bundle_versions.bundle_id IS 'The bundle.';
COMMENT ON COLUMN ledgerq.bundle_versions.version IS 'The bundle''s version the package is.';
COMMENT ON COLUMN ledgerq.bundle_versions.core IS 'Core it was built for.';
COMMENT ON COLUMN ledgerq.bundle_versions.anchor_slot IS 'Timeslot of its anchor: once the chain is past anchor_slot + 8 it can no longer be guaranteed.';
COMMENT ON COLUMN ledgerq.bundle_versions.anchor_hash IS 'Header hash of its anchor.';
COMMENT ON COLUMN ledgerq.bundle_versions.submitted_at IS 'When it was (last) claimed for submission.';
COMMENT ON COLUMN ledgerq.bundle_versions.outcome IS 'The submission''s answer: NULL not yet recorded, sent (the guarantors took it), unknown (indeterminate: the guarantee timeout decides), refused: <reason>.';
COMMENT ON COLUMN ledgerq.bundle_versions.guaranteed_slot IS 'Timeslot of the block whose E_G guaranteed it, for the one version that won; NULL for the others (a later guarantee of another version is ignored).';

CREATE INDEX bundle_versions_bundle ON ledgerq.bundle_versions (bundle_id, version);

CREATE TABLE ledgerq.cores (
    chain_id   bigint      NOT NULL REFERENCES ledgerq.builder_chains (chain_id),
    core       integer     NOT NULL,
    bundle_id  bigint      UNIQUE REFERENCES ledgerq.bundles (id),
    updated_at timestamptz NOT NULL,

    PRIMARY KEY (chain_id, core),
    CONSTRAINT cores_core_not_negative CHECK (core >= 0),
    CONSTRAINT cores_times_finite CHECK (isfinite(updated_at))
);

COMMENT ON TABLE ledgerq.cores IS 'Builder lane: one row per JAM core a chain''s bundles may use. A claim locks a free row FOR UPDATE SKIP LOCKED and points it at the bundle it submits, so at most that many bundles are submitted at once across processes.';
COMMENT ON COLUMN ledgerq.cores.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.cores.core IS 'Core index, 0 to cores - 1.';
COMMENT ON COLUMN ledgerq.cores.bundle_id IS 'The submitted bundle holding the core (bundles.core points back); NULL when free.';
COMMENT ON COLUMN ledgerq.cores.updated_at IS 'Last change to the row.';

-- The claim's free cores.
CREATE INDEX cores_free ON ledgerq.cores (chain_id, core) WHERE bundle_id IS NULL;

-- A pool transaction in a bundle points at it: included iff bundle_id.
ALTER TABLE ledgerq.pool_txs
    ADD COLUMN bundle_id bigint REFERENCES ledgerq.bundles (id),
    ADD COLUMN bundle_pos integer,
    DROP CONSTRAINT pool_txs_included_iff_bundle,
    -- Included iff bundle_block; bundle_id and bundle_pos only when
    -- included, together. (The pool's own tests still mark rows included
    -- by hand, without a bundle: tightening to "included iff bundle_id"
    -- waits for them.)
    ADD CONSTRAINT pool_txs_included_iff_bundle CHECK (
        (bundle_block IS NOT NULL) = (state = 'included')
        AND (bundle_id IS NULL OR state = 'included')
        AND (bundle_pos IS NULL) = (bundle_id IS NULL)
    ),
    ADD CONSTRAINT pool_txs_bundle_pos_not_negative CHECK (bundle_pos IS NULL OR bundle_pos >= 0);
COMMENT ON COLUMN ledgerq.pool_txs.bundle_block IS 'State included: block number of its bundle (bundles.number of bundle_id, kept in step).';
COMMENT ON COLUMN ledgerq.pool_txs.bundle_id IS 'State included: the bundle it is in. A dropped bundle''s transactions go back to pending with it NULL.';
COMMENT ON COLUMN ledgerq.pool_txs.bundle_pos IS 'State included: its position in the bundle (0 first): the execution order.';
COMMENT ON COLUMN ledgerq.pool_txs.state IS 'pending, queued, included (in bundle bundle_id, number bundle_block), replaced (by replaced_by), dropped (drop_reason). The first three are live: they hold the nonce.';

DROP INDEX ledgerq.pool_txs_bundle;
-- A bundle's transactions in order (the claim builds its package from them).
CREATE UNIQUE INDEX pool_txs_bundle ON ledgerq.pool_txs (bundle_id, bundle_pos) WHERE bundle_id IS NOT NULL;

CREATE VIEW ledgerq.bundle_overview AS
SELECT
    b.chain_id,
    b.state::text AS state,
    count(*) AS bundles,
    sum(b.tx_count) AS txs,
    min(b.number) AS lowest_number,
    max(b.number) AS highest_number,
    min(b.updated_at) AS oldest_updated_at,
    coalesce(sum(v.versions), 0) AS versions_submitted,
    count(c.core) AS cores_held
FROM ledgerq.bundles b
LEFT JOIN LATERAL (SELECT count(*) AS versions FROM ledgerq.bundle_versions bv WHERE bv.bundle_id = b.id) v ON true
LEFT JOIN ledgerq.cores c ON c.bundle_id = b.id
GROUP BY b.chain_id, b.state;
COMMENT ON VIEW ledgerq.bundle_overview IS 'Builder lane bundles at a glance: per chain and state, how many, their transactions, number range, the longest unchanged, work packages submitted and cores held.';
COMMENT ON COLUMN ledgerq.bundle_overview.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.bundle_overview.state IS 'queued, submitted, guaranteed, accumulated, finalized or dropped.';
COMMENT ON COLUMN ledgerq.bundle_overview.bundles IS 'Number of bundles in this state.';
COMMENT ON COLUMN ledgerq.bundle_overview.txs IS 'Transactions cut into them (tx_count; a dropped bundle''s are back in the pool).';
COMMENT ON COLUMN ledgerq.bundle_overview.lowest_number IS 'Lowest block number among them (for queued: the next to be claimed).';
COMMENT ON COLUMN ledgerq.bundle_overview.highest_number IS 'Highest block number among them.';
COMMENT ON COLUMN ledgerq.bundle_overview.oldest_updated_at IS 'updated_at of the one unchanged longest (for submitted: the one waiting longest for its guarantee or timeout).';
COMMENT ON COLUMN ledgerq.bundle_overview.versions_submitted IS 'Work packages (versions, resubmissions of one package counted once) claimed for them.';
COMMENT ON COLUMN ledgerq.bundle_overview.cores_held IS 'Cores they hold (only submitted bundles hold one; at most the chain''s core count).';

-- +goose Down
DROP VIEW ledgerq.bundle_overview;
DROP INDEX ledgerq.pool_txs_bundle;
ALTER TABLE ledgerq.pool_txs
    DROP CONSTRAINT pool_txs_included_iff_bundle,
    DROP CONSTRAINT pool_txs_bundle_pos_not_negative,
    DROP COLUMN bundle_pos,
    DROP COLUMN bundle_id;
ALTER TABLE ledgerq.pool_txs
    ADD CONSTRAINT pool_txs_included_iff_bundle CHECK ((bundle_block IS NOT NULL) = (state = 'included'));
CREATE INDEX pool_txs_bundle ON ledgerq.pool_txs (chain_id, bundle_block) WHERE bundle_block IS NOT NULL;
COMMENT ON COLUMN ledgerq.pool_txs.bundle_block IS 'State included: block number of the bundle the transaction is in (a later migration makes it a foreign key to the bundles table).';
COMMENT ON COLUMN ledgerq.pool_txs.state IS 'pending, queued, included (in bundle bundle_block), replaced (by replaced_by), dropped (drop_reason). The first three are live: they hold the nonce.';
DROP TABLE ledgerq.cores;
DROP TABLE ledgerq.bundle_versions;
DROP TABLE ledgerq.bundles;
DROP TYPE ledgerq.bundle_state;
DROP TABLE ledgerq.builder_chains;
