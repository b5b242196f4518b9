-- +goose Up
-- Wallet lane: wallets declared at run time (POST /v1/wallets), beside the
-- ones the configuration declares. A row is a reference to a key, never the
-- key: a keystore file's name, a PKCS#11 key label, a KMS key id, a remote
-- signer's account. PINs, passphrases and credentials stay in the files and
-- environment the configuration names. Every serve process reads the table
-- at start, when ledgerq_wallets is notified (by the statement that changes
-- it), and every few seconds.
CREATE TABLE ledgerq.wallets (
    name        text        PRIMARY KEY,
    chain       text        NOT NULL,
    chain_id    bigint      NOT NULL,
    address     text        NOT NULL,
    backend     text        NOT NULL,
    key_ref     text        NOT NULL DEFAULT '',
    disabled    boolean     NOT NULL DEFAULT false,
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,

    CONSTRAINT wallets_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    CONSTRAINT wallets_chain_format CHECK (chain ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    CONSTRAINT wallets_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT wallets_address_format CHECK (octet_length(address) = 42 AND address ~ '^0x[0-9a-f]+$'),
    CONSTRAINT wallets_backend_known CHECK (backend IN ('keystore', 'pkcs11', 'awskms', 'clef')),
    CONSTRAINT wallets_key_ref_size CHECK (length(key_ref) <= 2048),
    CONSTRAINT wallets_created_by_size CHECK (created_by <> '' AND length(created_by) <= 256),
    CONSTRAINT wallets_times_finite CHECK (isfinite(created_at) AND isfinite(updated_at)),
    -- One shard sends for an address on a chain: two wallets of one sender
    -- would assign its nonces twice.
    CONSTRAINT wallets_sender_unique UNIQUE (chain_id, address)
);

COMMENT ON TABLE ledgerq.wallets IS 'Wallet lane: wallets added at run time (POST /v1/wallets), read by every serve process within seconds; the configuration''s own wallets are not here. A reference to a key, never key material.';
COMMENT ON COLUMN ledgerq.wallets.name IS 'The wallet''s name in the API and in wallet_tasks.wallet_id.';
COMMENT ON COLUMN ledgerq.wallets.chain IS 'The chain''s name, as the configuration declares it (--wallet-chain name=…; default for --wallet-ledger-url).';
COMMENT ON COLUMN ledgerq.wallets.chain_id IS 'The chain''s id when the wallet was added.';
COMMENT ON COLUMN ledgerq.wallets.address IS 'The address the key must have, lower-case hex: a process whose signer derives another address refuses the wallet.';
COMMENT ON COLUMN ledgerq.wallets.backend IS 'Where the key is: keystore (a file in --wallet-keystore-dir), pkcs11 (an HSM token of --wallet-pkcs11), awskms (a key of --wallet-kms), clef (an account of the remote signer --wallet-clef).';
COMMENT ON COLUMN ledgerq.wallets.key_ref IS 'The key within its backend: a keystore file name, a PKCS#11 key label (or id:HEX), a KMS key id, ARN or alias; empty for clef (the address names the account). Never a secret.';
COMMENT ON COLUMN ledgerq.wallets.disabled IS 'True: the wallet takes no new task; the tasks it has still run to their end.';
COMMENT ON COLUMN ledgerq.wallets.created_at IS 'When the wallet was added.';
COMMENT ON COLUMN ledgerq.wallets.updated_at IS 'When it was last changed (disabled or enabled).';
COMMENT ON COLUMN ledgerq.wallets.created_by IS 'Name of the API key that added the wallet (anonymous without keys).';

-- +goose Down
DROP TABLE ledgerq.wallets;
