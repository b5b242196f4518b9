// Package pkcs11 is a keystore.Signer whose secp256k1 key stays in an HSM,
// reached through PKCS#11: the key is found by its CKA_LABEL and/or CKA_ID
// on a token, its public key read once at Open to derive (and check) the
// Ethereum address, and each transaction's signing hash signed with
// CKM_ECDSA; keystore.SignDigestTx makes the recoverable, low-s signature
// from the device's bare (r, s).
//
// Why cgo: PKCS#11 is a C ABI. A vendor ships its module as a shared
// library that the application loads with dlopen and calls through
// C_GetFunctionList's table of C function pointers; no pure-Go binding can
// make those calls. github.com/miekg/pkcs11, the well-kept Go binding, does
// it with cgo, so this package needs CGO_ENABLED=1 and the module's C
// runtime at run time. The ledgerq binary is built with CGO_ENABLED=0
// (deploy/build-image.sh). Its files build only with cgo (//go:build
// cgo), so that `CGO_ENABLED=0 go build ./...` and vet still pass, with
// this package empty; its importers (`ledgerq wallet new --backend
// pkcs11`) do so from cgo-tagged files with a !cgo twin that says how to
// build with cgo.
//
// Generate makes a key on a token (C_GenerateKeyPair): sensitive, never
// extractable, labelled and with an id, refusing a label or id the token
// has already.
//
// A module is initialised once per process (C_Initialize is process-wide,
// and so is a token's login state): signers of the same module share it,
// and the last Close finalises it. Each Signer holds one session, used by
// one call at a time (a PKCS#11 session is not safe for concurrent use);
// an HSM signs in about a millisecond and the wallet lane signs one
// transaction at a time per wallet, so a pool of sessions would buy
// nothing yet. A call waiting for the session gives up when its context
// is done; a C_Sign already running cannot be cancelled, and its answer is
// returned even if the deadline passed meanwhile.
//
// A device that cannot be reached — the module does not load, the token is
// removed or absent, a device or general error, a session closed or
// invalidated behind the signer's back (an HSM restart, another
// C_CloseAllSessions or C_Finalize in the process) — is a
// *keystore.UnavailableError with Backend "pkcs11": nothing was signed.
// After any error the session is dropped, and the next call opens a new
// one, logs in again and finds the key again. A wrong PIN, a missing key,
// a key on another curve or of another address are plain errors: waiting
// does not mend them.
//
// The PIN is the caller's to read (from a file or the environment); it is
// never logged and never part of an error, a String or a GoString.
package pkcs11
