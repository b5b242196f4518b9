-- name: WalletHealthGet :one
SELECT * FROM ledgerq.wallet_health WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletHealthObserveNonce :exec
-- Confirm: the chain's nonce and head as read; chain_nonce_since moves only
-- when the nonce changed (the stall timeout counts from it).
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, chain_nonce, chain_nonce_since, chain_head, created_at, updated_at)
VALUES (@chain_id, @sender, @chain_nonce::bigint, @now::timestamptz, @chain_head::bigint, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET chain_nonce = @chain_nonce::bigint, chain_head = @chain_head::bigint, updated_at = @now::timestamptz,
    chain_nonce_since = CASE WHEN h.chain_nonce IS DISTINCT FROM @chain_nonce::bigint THEN @now::timestamptz ELSE h.chain_nonce_since END;

-- name: WalletHealthSetBalance :one
-- Balance health: the balance as read, and the threshold computed with it
-- (what a plain transfer costs at the fees of the moment); sending pauses
-- while the balance is below it. Returns the row.
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, balance_wei, balance_at, threshold_wei, paused, created_at, updated_at)
VALUES (@chain_id, @sender, @balance::numeric, @now::timestamptz, @threshold::numeric, @balance::numeric < @threshold::numeric,
        @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET balance_wei = @balance::numeric, balance_at = @now::timestamptz, threshold_wei = @threshold::numeric,
    paused = @balance::numeric < @threshold::numeric, updated_at = @now::timestamptz
RETURNING *;

-- name: WalletHealthMarkBalanceStale :exec
-- A send refused for insufficient funds: the balance is read again before
-- the next send (the refused task alone ended in error).
UPDATE ledgerq.wallet_health SET balance_at = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletHealthRecordReset :exec
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, resets, last_reset_at, last_reset_from, last_reset_to, created_at, updated_at)
VALUES (@chain_id, @sender, 1, @now::timestamptz, @from_nonce::bigint, @to_nonce::bigint, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET resets = h.resets + 1, last_reset_at = @now::timestamptz, last_reset_from = @from_nonce::bigint,
    last_reset_to = @to_nonce::bigint, updated_at = @now::timestamptz;

-- name: WalletListWithWork :many
-- Kept with wallet_health, the wallet aggregate's row per wallet, though it
-- reads tx_attempts and wallet_tasks too.
-- Follower: the (chain, sender) pairs with live attempts (signed, sent or
-- mined) or waiting tasks, and those whose chain nonce moved after
-- @watch_since (their final transactions are watched a while longer, in case
-- the chain loses them), in (chain_id, sender) order after the given pair.
-- Each attempts and tasks part is a loose index scan (one index probe per
-- distinct pair, through tx_attempts_signed, tx_attempts_sent,
-- tx_attempts_mined and wallet_tasks_waiting_fifo), so a long queue of one
-- wallet costs no more than a short one; wallet_health has a row per wallet.
WITH RECURSIVE
signed(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'signed' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM signed s CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'signed' AND (a.chain_id, a.sender) > (s.chain_id, s.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
sent(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'sent' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM sent s CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'sent' AND (a.chain_id, a.sender) > (s.chain_id, s.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
mined(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'mined' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM mined m CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'mined' AND (a.chain_id, a.sender) > (m.chain_id, m.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
waiting(chain_id, sender) AS (
    (SELECT t.chain_id, t.sender FROM ledgerq.wallet_tasks t
     WHERE t.status = 0 AND (t.chain_id, t.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY t.chain_id, t.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM waiting w CROSS JOIN LATERAL (
        SELECT t.chain_id, t.sender FROM ledgerq.wallet_tasks t
        WHERE t.status = 0 AND (t.chain_id, t.sender) > (w.chain_id, w.sender)
        ORDER BY t.chain_id, t.sender LIMIT 1
    ) n
),
watched(chain_id, sender) AS (
    SELECT h.chain_id, h.sender FROM ledgerq.wallet_health h
    WHERE h.chain_nonce_since > @watch_since::timestamptz
      AND (h.chain_id, h.sender) > (@after_chain_id::bigint, @after_sender::text)
)
SELECT u.chain_id::bigint AS chain_id, u.sender::text AS sender
FROM (SELECT * FROM signed UNION SELECT * FROM sent UNION SELECT * FROM mined
      UNION SELECT * FROM waiting UNION SELECT * FROM watched) u
ORDER BY u.chain_id, u.sender
LIMIT @max;

-- name: WalletRecoveryHold :exec
-- Restore recovery: nothing is signed for the wallet while the chain's
-- transactions at nonces the database does not know cannot be read;
-- recovery_since keeps the first time.
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, recovery_reason, recovery_since, created_at, updated_at)
VALUES (@chain_id, @sender, @reason::text, @now::timestamptz, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET recovery_reason = @reason::text, recovery_since = coalesce(h.recovery_since, @now::timestamptz), updated_at = @now::timestamptz;

-- name: WalletRecoveryEnd :execrows
-- Restore recovery: every nonce the chain used is known again.
UPDATE ledgerq.wallet_health
SET recovery_reason = NULL, recovery_since = NULL, scan_block = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender AND (recovery_reason IS NOT NULL OR scan_block IS NOT NULL);

-- name: WalletHealthSetScan :exec
-- Restore recovery: the next block to read for the wallet's transactions at
-- unknown nonces (NULL: start again from its last mined block).
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, scan_block, created_at, updated_at)
VALUES (@chain_id, @sender, sqlc.narg(scan_block)::bigint, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET scan_block = sqlc.narg(scan_block)::bigint, updated_at = @now::timestamptz;

-- name: WalletHealthHold :one
-- An operator holds the wallet: no new task is sent until released. A
-- wallet already held keeps its first hold.
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, held_at, held_by, created_at, updated_at)
VALUES (@chain_id, @sender, @now::timestamptz, @held_by, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET held_at = coalesce(h.held_at, EXCLUDED.held_at), held_by = coalesce(h.held_by, EXCLUDED.held_by),
    updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: WalletHealthRelease :one
-- An operator releases the wallet's hold.
UPDATE ledgerq.wallet_health
SET held_at = NULL, held_by = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender
RETURNING *;

-- name: WalletHealthListStopped :many
-- The console's health panel: wallets that send nothing new, paused for
-- their balance, held by an operator, recovering from a restore, or whose
-- signer is unavailable.
SELECT * FROM ledgerq.wallet_health
WHERE paused OR held_at IS NOT NULL OR recovery_reason IS NOT NULL OR signer_state = 'unavailable'
ORDER BY chain_id, sender;

-- name: WalletHealthSetSigner :execrows
-- The wallet's signer changed state (ok, unavailable) or backend: recorded
-- with the error that made it unavailable. signer_since moves only with the
-- state or the backend, and a write that changes neither (the first outcome
-- after a restart, when the row already says it) leaves the row as it is.
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, signer_backend, signer_state, signer_error, signer_since, created_at, updated_at)
VALUES (@chain_id, @sender, @backend::text, @state::text, sqlc.narg(error)::text, @now::timestamptz, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET signer_backend = EXCLUDED.signer_backend, signer_state = EXCLUDED.signer_state, signer_error = EXCLUDED.signer_error,
    signer_since = EXCLUDED.signer_since, updated_at = EXCLUDED.updated_at
WHERE (h.signer_backend, h.signer_state) IS DISTINCT FROM (EXCLUDED.signer_backend, EXCLUDED.signer_state);

-- name: WalletHealthListSignerUnavailable :many
-- /readyz: the wallets whose signer is unavailable (through
-- wallet_health_signer_unavailable), at most @max.
SELECT * FROM ledgerq.wallet_health
WHERE signer_state = 'unavailable'
ORDER BY chain_id, sender
LIMIT @max;

-- name: WalletHealthLastRead :one
-- When confirm last recorded what it read of a wallet's chain: the
-- console's sign of life of the wallet lane's ledger.
SELECT max(updated_at) AS at FROM ledgerq.wallet_health;
