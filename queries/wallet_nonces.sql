-- name: WalletNonceGet :one
SELECT * FROM ledgerq.wallet_nonces WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletNonceAdvance :one
-- Write-ahead: the next nonce moves from @expected to @next, but only if it
-- is still @expected (compare-and-set: the caller signed with the nonces it
-- read); the first store of an address inserts the row. No row: another
-- writer moved it, and nothing may be stored.
INSERT INTO ledgerq.wallet_nonces AS n (chain_id, sender, next_nonce, created_at, updated_at)
VALUES (@chain_id, @sender, @next, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET next_nonce = @next, updated_at = @now::timestamptz
WHERE n.next_nonce = @expected
RETURNING n.next_nonce;

-- name: WalletNonceRaise :execrows
-- Reconciliation (nonce sync, upward only): the chain's nonce
-- passed the next nonce (someone else sent from the address), so the next new
-- nonce starts at the chain's. No live attempt can sit at or above the old
-- next nonce, so none is skipped over. Lowering it is a nonce reset
-- (WalletNonceReset).
UPDATE ledgerq.wallet_nonces
SET next_nonce = @at_least, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender AND next_nonce < @at_least;

-- name: WalletNonceListFreed :many
-- Send (recycled nonces): nonces from @from_nonce (the chain's nonce) up to
-- the next nonce that no live attempt holds — their attempt was dropped (a
-- deterministic rejection, a replacement) — lowest first. The next send fills
-- them before taking new nonces, so the chain never waits on a gap. The
-- attempts are read through tx_attempts_live_nonce from @from_nonce on only
-- (the confirmed ones below it may be many).
SELECT g.nonce::bigint AS nonce
FROM ledgerq.wallet_nonces w
CROSS JOIN LATERAL generate_series(@from_nonce::bigint, w.next_nonce - 1) AS g(nonce)
WHERE w.chain_id = @chain_id AND w.sender = @sender
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.tx_attempts a
      WHERE a.chain_id = w.chain_id AND a.sender = w.sender AND a.nonce = g.nonce AND a.state <> 'dropped'
        AND a.nonce >= @from_nonce::bigint
  )
ORDER BY g.nonce
LIMIT @max;

-- name: WalletNonceReset :execrows
-- Nonce reset / recycled nonces above the highest live one: the next nonce
-- moves (down or up) from @from to @to, only if it is still @from and no
-- attempt that is not dropped (confirmed ones included) sits at or above @to,
-- nor a signature request of a signer outside the process
-- (wallet_sign_requests): none is skipped over or signed again with other
-- content.
UPDATE ledgerq.wallet_nonces w
SET next_nonce = @to_nonce::bigint, updated_at = @now::timestamptz
WHERE w.chain_id = @chain_id AND w.sender = @sender AND w.next_nonce = @from_nonce::bigint
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.tx_attempts a
      WHERE a.chain_id = w.chain_id AND a.sender = w.sender AND a.state <> 'dropped'
        AND a.nonce >= @to_nonce::bigint
  )
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.wallet_sign_requests r
      WHERE r.chain_id = w.chain_id AND r.sender = w.sender AND r.nonce >= @to_nonce::bigint
  );
