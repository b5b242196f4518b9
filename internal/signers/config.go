package signers

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/keystore"
)

// Backends a declaration may name.
const (
	Keystore = "keystore"
	PKCS11   = "pkcs11"
	AWSKMS   = "awskms"
	Clef     = "clef"
)

// Known are the backends, in the order the documents list them.
var Known = []string{Keystore, PKCS11, AWSKMS, Clef}

// Config is where the signer backends are, for the wallets that name them
// (the configuration's --wallet-signer and those added at run time). Its
// tags declare the settings (internal/config): section wallet, flags
// --wallet-*.
type Config struct {
	// KeystoreDir holds the keystore files that wallets added at run time
	// name (a file name, never a path).
	KeystoreDir string `flag:"keystore-dir" only:"ledger" help:"the directory of the keystore files that wallets added at run time name (backend keystore, key=FILE_NAME); each file's passphrase as for --wallet-keystore"`
	// PKCS11Module, PKCS11Token and PKCS11PINFile are the HSM: the
	// vendor's PKCS#11 library, the token's label, and a file whose first
	// line is the user PIN (else LEDGERQ_PKCS11_PIN).
	PKCS11Module  string `flag:"pkcs11-module" only:"ledger" help:"the PKCS#11 library (.so) of the HSM whose keys wallets name (backend pkcs11, key=LABEL or key=id:HEX); needs a ledgerq built with cgo"`
	PKCS11Token   string `flag:"pkcs11-token" only:"ledger" help:"the label of the PKCS#11 token the keys are on"`
	PKCS11PINFile string `flag:"pkcs11-pin-file" only:"ledger" help:"a file whose first line is the token's user PIN (else the environment variable LEDGERQ_PKCS11_PIN)"`
	// KMSRegion and KMSEndpoint are AWS KMS: the keys' region (else the
	// SDK's: AWS_REGION, the shared configuration) and a KMS-compatible
	// endpoint (else AWS's). Credentials come from the SDK's default chain.
	KMSRegion   string `flag:"kms-region" only:"ledger" help:"the AWS region of the KMS keys wallets name (backend awskms, key=KEY_ID, ARN or alias); empty: the AWS SDK's (AWS_REGION). Credentials: the AWS SDK's default chain"`
	KMSEndpoint string `flag:"kms-endpoint" only:"ledger" secret:"url" help:"a KMS-compatible endpoint URL instead of AWS's (for example a local KMS)"`
	// ClefURL and ClefTimeout are the remote signer.
	ClefURL     string        `flag:"clef-url" only:"ledger" secret:"url" help:"the JSON-RPC URL of the clef remote signer whose accounts wallets name (backend clef, address=0x…); clef's rules decide what it signs"`
	ClefTimeout time.Duration `flag:"clef-timeout" only:"ledger" help:"how long one signature by clef may take"`
	// Wallets are the configuration's declarations.
	Wallets Decls `flag:"signer" only:"ledger" help:"a wallet whose key is in a signer backend: name=NAME,backend=keystore|pkcs11|awskms|clef[,chain=CHAIN][,key=REF][,address=0x…]; repeatable (a list of mappings in the file). key: keystore, the file; pkcs11, the key's label or id:HEX; awskms, the key id, ARN or alias; clef, none (address is required)"`

	// LookupEnv reads the environment (the PIN); nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Defaults are the backends' defaults.
func Defaults() Config { return Config{ClefTimeout: 10 * time.Second} }

// PINEnv is the environment variable holding the PKCS#11 user PIN when no
// PIN file is given.
const PINEnv = "LEDGERQ_PKCS11_PIN"

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if (c.PKCS11Module == "") != (c.PKCS11Token == "") {
		errs = append(errs, errors.New("--wallet-pkcs11-module and --wallet-pkcs11-token go together"))
	}
	if c.ClefTimeout < 0 {
		errs = append(errs, errors.New("--wallet-clef-timeout must not be negative"))
	}
	if err := c.Wallets.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Decl declares a wallet whose key is in a signer backend.
type Decl struct {
	// Name is the wallet's name; Chain its chain's (empty: the lane's only
	// chain).
	Name  string
	Chain string
	// Backend is one of Known; Key the key in it (see Config.Wallets).
	Backend string
	Key     string
	// Address, when set, is the address the key must have.
	Address common.Address
	// Declared says the wallet was added at run time: its keystore file
	// must then be a file name in Config.KeystoreDir.
	Declared bool
}

// String is the declaration as the flag takes it.
func (d Decl) String() string {
	parts := []string{"name=" + d.Name, "backend=" + d.Backend}
	if d.Chain != "" {
		parts = append(parts, "chain="+d.Chain)
	}
	if d.Key != "" {
		parts = append(parts, "key="+d.Key)
	}
	if d.Address != (common.Address{}) {
		parts = append(parts, "address="+d.Address.Hex())
	}
	return strings.Join(parts, ",")
}

// ParseDecl parses name=NAME,backend=B[,chain=C][,key=K][,address=0x…].
func ParseDecl(s string) (Decl, error) {
	var d Decl
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return d, fmt.Errorf("signer: %q: want key=value", part)
		}
		switch k {
		case "name":
			d.Name = v
		case "chain":
			d.Chain = v
		case "backend":
			d.Backend = v
		case "key":
			d.Key = v
		case "address":
			if !common.IsHexAddress(v) {
				return d, fmt.Errorf("signer %s: address %q is not a hex address", d.Name, v)
			}
			d.Address = common.HexToAddress(v)
		default:
			return d, fmt.Errorf("signer %s: unknown key %q (want name, chain, backend, key, address)", d.Name, k)
		}
	}
	return d, d.Validate()
}

// Validate reports what cannot work in one declaration.
func (d Decl) Validate() error {
	switch {
	case !keystore.ValidID(d.Name):
		return fmt.Errorf("wallet %q: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", d.Name)
	case d.Chain != "" && !keystore.ValidID(d.Chain):
		return fmt.Errorf("wallet %s: chain %q is not a chain name", d.Name, d.Chain)
	case !slices.Contains(Known, d.Backend):
		return fmt.Errorf("wallet %s: backend %q: want one of %s", d.Name, d.Backend, strings.Join(Known, ", "))
	case d.Backend == Clef && d.Address == (common.Address{}):
		return fmt.Errorf("wallet %s: a clef wallet names its account: address=0x…", d.Name)
	case d.Backend == Clef && d.Key != "":
		return fmt.Errorf("wallet %s: a clef wallet has no key (its address names the account)", d.Name)
	case d.Backend != Clef && d.Key == "":
		return fmt.Errorf("wallet %s: backend %s needs key=… (%s)", d.Name, d.Backend, keyMeaning[d.Backend])
	case len(d.Key) > 2048:
		return fmt.Errorf("wallet %s: key is longer than 2048 bytes", d.Name)
	case strings.ContainsAny(d.Key, "\x00\r\n"):
		return fmt.Errorf("wallet %s: key holds a control character", d.Name)
	}
	if d.Declared && d.Backend == Keystore && (d.Key != filepath.Base(d.Key) || d.Key == "." || d.Key == "..") {
		return fmt.Errorf("wallet %s: key %q: a wallet added at run time names a file in --wallet-keystore-dir, not a path", d.Name, d.Key)
	}
	if d.Backend == PKCS11 {
		if _, _, err := pkcs11Key(d.Key); err != nil {
			return fmt.Errorf("wallet %s: %w", d.Name, err)
		}
	}
	return nil
}

var keyMeaning = map[string]string{
	Keystore: "the keystore file",
	PKCS11:   "the key's label, or id:HEX",
	AWSKMS:   "the KMS key id, ARN or alias",
}

// Decls is the repeatable --wallet-signer setting (a flag.Value; in the
// file a list of mappings). Several declarations in one value are
// separated by ';'.
type Decls []Decl

// KeyValues marks Decls as a setting of key=value pairs (config.KeyValues).
func (*Decls) KeyValues() {}

// String lists the declarations.
func (l *Decls) String() string {
	if l == nil {
		return ""
	}
	return config.JoinKeyValues(*l)
}

// Set adds the declarations of v.
func (l *Decls) Set(v string) error {
	return config.AppendKeyValues((*[]Decl)(l), v, ParseDecl)
}

// Validate reports declarations that clash (one name twice).
func (l Decls) Validate() error {
	seen := map[string]bool{}
	var errs []error
	for _, d := range l {
		if err := d.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("wallet %s is declared twice (--wallet-signer)", d.Name))
		}
		seen[d.Name] = true
	}
	return errors.Join(errs...)
}

func errNoPKCS11(d Decl) error {
	return fmt.Errorf("wallet %s: no HSM is configured for pkcs11 wallets (--wallet-pkcs11-module and --wallet-pkcs11-token)", d.Name)
}
