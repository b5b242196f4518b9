-- +goose Up
-- Wallet lane, the write-ahead across signers: a signer outside the process
-- (an HSM, a KMS, a remote signer) keeps what it was asked to sign — the
-- signature, or at least the request in its audit log — even when ledgerq
-- dies before it stores the attempt. So before such a signer is asked to sign
-- at a nonce, the request is recorded here, and until that nonce's attempt is
-- stored the nonce is pinned to the request's content: it is only ever asked
-- again with the same content. A wallet whose key is in the process (a
-- keystore file) records nothing: a signature it made and never stored exists
-- nowhere.

CREATE TABLE ledgerq.wallet_sign_requests (
    chain_id     bigint      NOT NULL,
    sender       text        NOT NULL,
    nonce        bigint      NOT NULL,
    -- No ON DELETE CASCADE: a task whose transaction is being signed is
    -- waiting (it cannot be cancelled, and the lane never ends it in error),
    -- and deleting it would free a nonce a signature may exist for; the
    -- database refuses that delete instead.
    task_id      text        REFERENCES ledgerq.wallet_tasks (id),
    content_hash bytea       NOT NULL,
    gas_limit    bigint      NOT NULL,
    requested_at timestamptz NOT NULL,

    PRIMARY KEY (chain_id, sender, nonce),
    CONSTRAINT wallet_sign_requests_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT wallet_sign_requests_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$'),
    CONSTRAINT wallet_sign_requests_nonce_not_negative CHECK (nonce >= 0),
    CONSTRAINT wallet_sign_requests_content_hash_keccak256 CHECK (octet_length(content_hash) = 32),
    CONSTRAINT wallet_sign_requests_gas_limit_positive CHECK (gas_limit > 0),
    CONSTRAINT wallet_sign_requests_times_finite CHECK (isfinite(requested_at))
);

COMMENT ON TABLE ledgerq.wallet_sign_requests IS 'Wallet lane: signatures ledgerq asked of a signer outside the process and has not stored as an attempt yet; each pins its nonce to its content until the attempt is stored.';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.sender IS 'The wallet''s address, lower-case hex.';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.nonce IS 'The nonce the signer was asked to sign at; deleted with the attempt stored at it, or once the chain''s nonce passed it.';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.task_id IS 'The task the transaction carries out; NULL for a no-op (a 0-value transfer to the wallet itself).';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.content_hash IS 'Keccak-256 of the RLP list (chain id, sender, nonce, to, value, data): the content a new request at this nonce must have. Fees and the gas limit are not content.';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.gas_limit IS 'The gas limit the request was made with, used again when it is repeated (a new estimate could fail where the first passed).';
COMMENT ON COLUMN ledgerq.wallet_sign_requests.requested_at IS 'When the request was first recorded.';

-- A task's requests: the cancel refusal and the foreign key's check when a
-- task is deleted.
CREATE INDEX wallet_sign_requests_task ON ledgerq.wallet_sign_requests (task_id) WHERE task_id IS NOT NULL;

-- +goose Down
DROP TABLE ledgerq.wallet_sign_requests;
