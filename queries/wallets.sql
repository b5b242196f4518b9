-- name: WalletsList :many
-- Wallets added at run time, by name.
SELECT * FROM ledgerq.wallets ORDER BY name;

-- name: WalletsGet :one
SELECT * FROM ledgerq.wallets WHERE name = @name;

-- name: WalletsInsert :one
-- Adds a wallet; a name or a (chain, address) already taken inserts
-- nothing (no row).
INSERT INTO ledgerq.wallets (name, chain, chain_id, address, backend, key_ref, disabled, created_by, created_at, updated_at)
VALUES (@name, @chain, @chain_id, @address, @backend, @key_ref, @disabled, @created_by, @now::timestamptz, @now::timestamptz)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: WalletsSetDisabled :one
UPDATE ledgerq.wallets SET disabled = @disabled, updated_at = @now::timestamptz
WHERE name = @name
RETURNING *;

-- name: WalletsUnfinishedTasks :one
-- How many of the wallet's tasks have not ended (waiting or executing).
SELECT count(*) FROM ledgerq.wallet_tasks WHERE wallet_id = @name AND finished_at IS NULL;

-- name: WalletsDelete :execrows
DELETE FROM ledgerq.wallets WHERE name = @name;

-- name: WalletsLock :one
-- Locks the wallet's row for its removal: a task insert holding it in
-- share mode is waited for.
SELECT * FROM ledgerq.wallets WHERE name = @name FOR UPDATE;

-- name: WalletsLockShared :one
-- Holds the wallet's row while a task of it is stored, so that it is not
-- removed meanwhile; answers whether it is disabled.
SELECT disabled FROM ledgerq.wallets WHERE name = @name FOR SHARE;
