-- name: WalletDirectoryPutConfig :exec
-- A wallet of the configuration, written at serve start. A wallet added at
-- run time under the same name keeps its row (its trigger writes it).
INSERT INTO ledgerq.wallet_directory AS d (wallet_id, chain_id, sender, source, disabled, updated_at)
VALUES (@wallet_id, @chain_id, @sender, 'config', false, @now::timestamptz)
ON CONFLICT (wallet_id) DO UPDATE
SET chain_id = EXCLUDED.chain_id, sender = EXCLUDED.sender, disabled = false, updated_at = EXCLUDED.updated_at
WHERE d.source = 'config';

-- name: WalletDirectoryDeleteConfigExcept :execrows
-- The configuration's wallets it no longer declares.
DELETE FROM ledgerq.wallet_directory
WHERE source = 'config' AND NOT (wallet_id = ANY(@keep::text[]));

-- name: WalletDirectoryList :many
SELECT * FROM ledgerq.wallet_directory ORDER BY wallet_id;

-- name: SettingPut :exec
-- A setting SQL functions read (ledgerq.settings), written at serve start.
INSERT INTO ledgerq.settings (name, value, updated_at) VALUES (@name, @value, @now::timestamptz)
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
