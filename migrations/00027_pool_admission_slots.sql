-- +goose Up
-- Builder lane, the pool's global limits without one hot row. An intake
-- that grows the pool used to lock its chain's pool_chains row and count
-- the pool under it until its commit, so every intake of the chain, in every
-- process, waited for the one before to commit. Now it takes one of 16
-- admission slots (SKIP LOCKED) and reads an upper bound of the pool's
-- pending and queued transactions: the chain's base (an exact count, taken
-- when a slot-holding intake could not prove the pool below its limits) plus
-- the growth intakes recorded in the slots since, minus what cuts took out.
-- The bound ignores at most 15 intakes in flight (one per other slot, each
-- growing the pool by at most one transaction, or it takes every slot): an
-- intake admits on it when the bound and those 15 fit the limit, and else
-- takes all 16 slots and the chain's row, counts exactly and rebases.

ALTER TABLE ledgerq.pool_chains
    ADD COLUMN pending_base bigint,
    ADD COLUMN queued_base  bigint,
    -- Both known or neither (NULL: not counted yet; the next intake that
    -- grows the pool counts).
    ADD CONSTRAINT pool_chains_base_whole CHECK ((pending_base IS NULL) = (queued_base IS NULL));

COMMENT ON TABLE ledgerq.pool_chains IS 'Builder lane: one row per chain the pool serves, with the base of the bound on its pending and queued transactions that admission reads (see pool_admission_slots). An intake that cannot prove the pool below its limits on the bound locks this row after every slot, counts exactly, and rebases.';
COMMENT ON COLUMN ledgerq.pool_chains.pending_base IS 'With the slots'' pending_growth, an upper bound of the chain''s pending transactions: set to an exact count under every slot''s lock, raised by a bundle drop (its transactions return to pending), lowered by a cut. NULL until first counted.';
COMMENT ON COLUMN ledgerq.pool_chains.queued_base IS 'The same for queued transactions: raised when an expiry sends pending ones back to queued.';

CREATE TABLE ledgerq.pool_admission_slots (
    chain_id       bigint   NOT NULL REFERENCES ledgerq.pool_chains (chain_id),
    slot           smallint NOT NULL,
    pending_growth bigint   NOT NULL DEFAULT 0,
    queued_growth  bigint   NOT NULL DEFAULT 0,

    PRIMARY KEY (chain_id, slot),
    -- 16 slots: admission's slack is 15 transactions per limit.
    CONSTRAINT pool_admission_slots_slot_range CHECK (slot BETWEEN 0 AND 15)
) WITH (fillfactor = 10);
-- Every intake that grows the pool updates a row: a low fill factor spreads
-- the 16 rows over pages of their own (no page every intake latches) with
-- room for their new versions on the same page (HOT, no index entry).

COMMENT ON TABLE ledgerq.pool_admission_slots IS 'Builder lane: 16 rows per chain. An intake that grows the pool locks one (SKIP LOCKED) and holds it to its commit, records its growth in it and reads the bound (pool_chains'' base plus every slot''s growth); so at most 16 such intakes are in flight at once and each sees every other one either committed or among the 15 its check allows for. An intake that takes all 16 (then the pool_chains row) counts exactly and sets the growths back to 0.';
COMMENT ON COLUMN ledgerq.pool_admission_slots.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.pool_admission_slots.slot IS 'Slot number, 0 to 15.';
COMMENT ON COLUMN ledgerq.pool_admission_slots.pending_growth IS 'Pending transactions added by the intakes that held the slot since the last exact count.';
COMMENT ON COLUMN ledgerq.pool_admission_slots.queued_growth IS 'Queued transactions added by the intakes that held the slot since the last exact count.';

-- +goose Down
DROP TABLE ledgerq.pool_admission_slots;
ALTER TABLE ledgerq.pool_chains
    DROP CONSTRAINT pool_chains_base_whole,
    DROP COLUMN queued_base,
    DROP COLUMN pending_base;
COMMENT ON TABLE ledgerq.pool_chains IS 'Builder lane: one row per chain the pool serves. An intake that adds a pending or queued transaction locks it (FOR UPDATE) as its last step, counts the pool and commits: so the global limits (1000 pending, 1000 queued) are exact across processes. Held only for the count and the commit.';
