package main

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/signers/awskms"
)

// pkcs11PINEnv holds the token's user PIN when no --pin-file is given: the
// variable serve's PKCS#11 wallets read too.
const pkcs11PINEnv = signers.PINEnv

// walletNewTimeout bounds the calls to an HSM or KMS of `wallet new`.
const walletNewTimeout = time.Minute

// walletNewBackendFlags says which backend each backend-specific flag of
// `wallet new` belongs to: given with another backend, it is a mistake.
var walletNewBackendFlags = map[string]string{
	"keystore-dir": "keystore", "passphrase-file": "keystore", "light-kdf": "keystore",
	"pkcs11-module": "pkcs11", "pkcs11-token": "pkcs11", "pkcs11-slot": "pkcs11", "label": "pkcs11", "id": "pkcs11", "pin-file": "pkcs11",
	"kms-region": "awskms", "kms-endpoint": "awskms", "alias": "awskms", "description": "awskms",
}

// flagsOfBackend refuses a flag given on the command line that belongs to
// another backend than backend (the environment's are ignored: one
// environment may serve several commands).
func flagsOfBackend(fs *flag.FlagSet, backend string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if b, ok := walletNewBackendFlags[f.Name]; ok && b != backend && err == nil {
			err = fmt.Errorf("--%s is a flag of --backend %s, not of --backend %s", f.Name, b, backend)
		}
	})
	return err
}

// pkcs11Flags are `wallet new --backend pkcs11`'s flags.
type pkcs11Flags struct {
	module, token, slot, label, id, pinFile string
}

// pkcs11Request is a checked pkcs11Flags with the PIN: what
// generatePKCS11Key needs.
type pkcs11Request struct {
	module, token string
	slot          *uint
	label         string
	id            []byte
	pin           string
	pinFrom       string // where the PIN came from, for errors and notes
	pinFile       string
}

// request checks the flags and reads the PIN.
func (f pkcs11Flags) request(lookupEnv func(string) (string, bool)) (pkcs11Request, error) {
	r := pkcs11Request{module: f.module, token: f.token, label: f.label, pinFile: f.pinFile}
	switch {
	case f.module == "":
		return r, errors.New("--pkcs11-module is required with --backend pkcs11 (the path of the HSM's PKCS#11 library)")
	case f.token == "" && f.slot == "":
		return r, errors.New("--pkcs11-token (the token's label) or --pkcs11-slot is required with --backend pkcs11")
	case f.label == "":
		return r, errors.New("--label is required with --backend pkcs11 (the new key's label, which serve names it by)")
	case !keystore.ValidID(f.label):
		return r, fmt.Errorf("--label %q: a key label here is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", f.label)
	}
	if _, err := os.Stat(f.module); err != nil {
		return r, fmt.Errorf("--pkcs11-module: %w", err)
	}
	if f.slot != "" {
		n, err := strconv.ParseUint(f.slot, 10, strconv.IntSize)
		if err != nil {
			return r, fmt.Errorf("--pkcs11-slot %q: not a slot number", f.slot)
		}
		slot := uint(n)
		r.slot = &slot
	}
	if f.id != "" {
		id, err := hex.DecodeString(strings.TrimPrefix(f.id, "0x"))
		if err != nil || len(id) == 0 {
			return r, fmt.Errorf("--id %q: not a key id in hex", f.id)
		}
		r.id = id
	}
	switch {
	case f.pinFile != "":
		pin, err := keystore.ReadPassphraseFile(f.pinFile) // its first line, as a passphrase file's
		if err != nil {
			return r, fmt.Errorf("--pin-file: %w", cmp.Or(errors.Unwrap(err), err))
		}
		if pin == "" {
			return r, fmt.Errorf("--pin-file %s: the first line is empty", f.pinFile)
		}
		r.pin, r.pinFrom = pin, "--pin-file "+f.pinFile
	default:
		if v, ok := lookupEnv(pkcs11PINEnv); ok && v != "" {
			r.pin, r.pinFrom = v, pkcs11PINEnv
		}
	}
	if r.pin == "" {
		return r, fmt.Errorf("no PIN: give --pin-file FILE or set %s (a PIN is never a flag's value: other users of the machine could read it)", pkcs11PINEnv)
	}
	return r, nil
}

// newPKCS11Wallet generates a key on a PKCS#11 token and prints it.
func newPKCS11Wallet(ctx context.Context, f pkcs11Flags, name string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	if err := pkcs11Available(); err != nil {
		return err
	}
	r, err := f.request(lookupEnv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, walletNewTimeout)
	defer cancel()
	addr, id, err := generatePKCS11Key(ctx, r)
	if err != nil {
		return err
	}
	where, token := "token "+r.token, r.token
	if r.token == "" {
		// serve names the token by its label.
		where, token = fmt.Sprintf("slot %d", *r.slot), fmt.Sprintf("'<the label of the token in slot %d>'", *r.slot)
	}
	fmt.Fprintf(stdout, "address:  %s\npkcs11:   label %s (id %s) on %s\n", addr.Hex(), r.label, hex.EncodeToString(id), where)
	pin, pinNote := "", "  (the PIN in "+pkcs11PINEnv+")\n"
	if r.pinFile != "" {
		pin, pinNote = " --wallet-pkcs11-pin-file "+r.pinFile, ""
	}
	fmt.Fprintf(stderr, "ledgerq wallet new: made a secp256k1 key on %s, sensitive and never extractable. To send from it:\n"+
		"  ledgerq serve --wallet-pkcs11-module %s --wallet-pkcs11-token %s%s --wallet-signer name=%s,chain=CHAIN,backend=pkcs11,key=%s,address=%s\n%s",
		where, r.module, token, pin, walletNewName(name), r.label, addr.Hex(), pinNote)
	printRuntimeWallet(stderr, name, "pkcs11", r.label, addr)
	return nil
}

// kmsFlags are `wallet new --backend awskms`'s flags.
type kmsFlags struct {
	region, endpoint, alias, description string
}

// newKMSWallet creates a key in AWS KMS and prints it.
func newKMSWallet(ctx context.Context, f kmsFlags, name string, stdout, stderr io.Writer) error {
	if f.region == "" {
		return errors.New("--kms-region is required with --backend awskms (the region to create the key in)")
	}
	ctx, cancel := context.WithTimeout(ctx, walletNewTimeout)
	defer cancel()
	keyID, addr, err := awskms.Create(ctx, awskms.Config{Region: f.region, Endpoint: f.endpoint}, f.description, f.alias)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "address:  %s\nawskms:   %s\n", addr.Hex(), keyID)
	if f.alias != "" {
		alias := f.alias
		if !strings.HasPrefix(alias, awskms.AliasPrefix) {
			alias = awskms.AliasPrefix + alias
		}
		fmt.Fprintf(stdout, "alias:    %s\n", alias)
	}
	where := "--wallet-kms-region " + f.region
	if f.endpoint != "" {
		where += " --wallet-kms-endpoint " + f.endpoint
	}
	fmt.Fprintf(stderr, "ledgerq wallet new: made a secp256k1 key in AWS KMS (%s). To send from it:\n"+
		"  ledgerq serve %s --wallet-signer name=%s,chain=CHAIN,backend=awskms,key=%s,address=%s\n",
		f.region, where, walletNewName(name), keyID, addr.Hex())
	printRuntimeWallet(stderr, name, "awskms", keyID, addr)
	return nil
}

func walletNewName(name string) string {
	if name == "" {
		return "NAME"
	}
	return name
}

// printRuntimeWallet prints the call that adds the wallet to a running
// serve (POST /v1/wallets, an admin key's).
func printRuntimeWallet(w io.Writer, name, backend, key string, addr common.Address) {
	body, _ := json.Marshal(struct {
		Name    string `json:"name"`
		Chain   string `json:"chain"`
		Backend string `json:"backend"`
		Key     string `json:"key"`
		Address string `json:"address"`
	}{walletNewName(name), "CHAIN", backend, key, addr.Hex()}) // a struct of strings always marshals
	fmt.Fprintf(w, "or, to a running serve, with an admin key:\n"+
		"  curl -X POST http://localhost:8080/v1/wallets -H \"Authorization: Bearer $ADMIN_KEY\" -d '%s'\n", body)
}
