// Package signers opens a wallet's keystore.Signer from a declaration that
// names where its key is — a go-ethereum keystore file, a key on a PKCS#11
// token (an HSM), an AWS KMS key, an account of a clef remote signer — and
// keeps the wallets added at run time (ledgerq.wallets) in the lane's
// keystore.Registry.
//
// A declaration is a reference, never a key: the backends' secrets (a
// keystore file's passphrase, the token's PIN, the cloud's credentials)
// come from the files and environment variables the configuration names,
// and are never stored, logged or answered. Every backend derives the
// key's address from its public key when the signer is opened, and a
// declaration that names an address refuses a key of another one.
//
// Wallets declared in the configuration (--wallet-signer, beside
// --wallet-keystore) are opened at start: one its backend refuses stops
// the start, loudly; one whose backend cannot be reached, with its address
// declared, gets a Lazy signer (its tasks wait; the backend is asked again
// at each signature) rather than stopping the process. Wallets added at run time (POST /v1/wallets) are
// opened by the process that adds them before they are stored, and by
// every other process when it reads the table: at start, when
// ledgerq_wallets is notified, and every few seconds. One whose backend a
// process cannot reach gets a Lazy signer there (its address is stored);
// one it cannot open otherwise (the key file is not in its directory) is
// retried on each read; both are shown with the reason in GET /v1/wallets,
// and the others go on.
//
// PKCS#11 is a C interface, so the pkcs11 backend exists only in a binary
// built with cgo (the default `go build` where a C compiler is installed);
// the static image (CGO_ENABLED=0) answers a pkcs11 declaration with an
// error that says so.
package signers
