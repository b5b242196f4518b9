package keystore

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	gethkeystore "github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Keystore wallets: ledgerq signs with go-ethereum keystore files (Web3
// Secret Storage, encrypted JSON), unlocked at start by a passphrase from the
// environment or a file. The private key lives only in the process's memory:
// it is never written to the database or a log, and no exported value of this
// package prints it.
//
// Configuration (the flags the commands register):
//
//	--wallet-keystore NAME=KEYSTORE_FILE  repeatable, or a comma-separated list
//	                                      (env LEDGERQ_WALLET_KEYSTORE); NAME is the wallet's
//	                                      name in the API (/v1/wallets/NAME/…)
//	--wallet-passphrase-file [NAME=]FILE  repeatable, or a comma-separated list
//	                                      (env LEDGERQ_WALLET_PASSPHRASE_FILE);
//	                                      the passphrase is the file's first line, as
//	                                      with geth's --password; without NAME= it is
//	                                      every wallet's
//
// A wallet's passphrase is the first of: its own passphrase file (NAME=FILE),
// the environment variable LEDGERQ_WALLET_PASSPHRASE_<NAME> (PassphraseEnv),
// the passphrase file of every wallet (FILE), the environment variable
// LEDGERQ_WALLET_PASSPHRASE. The specific wins over the general; an empty
// variable counts as unset (an empty passphrase comes from an empty file).

// PassphraseEnvAll is the environment variable holding the passphrase of
// every wallet that has none of its own.
const PassphraseEnvAll = "LEDGERQ_WALLET_PASSPHRASE"

// PassphraseEnv is the environment variable holding wallet name's own
// passphrase: LEDGERQ_WALLET_PASSPHRASE_ and the name in upper case, with
// '.' and '-' written '_' ("hot-1" → LEDGERQ_WALLET_PASSPHRASE_HOT_1).
func PassphraseEnv(name string) string {
	return PassphraseEnvAll + "_" + envSuffix(name)
}

func envSuffix(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' {
			return '_'
		}
		return r
	}, strings.ToUpper(name))
}

// KeystoreSpec is one --wallet-keystore value: a wallet's name and its keystore file.
type KeystoreSpec struct {
	// Name is the wallet's name (ValidID).
	Name string
	// Chain is the name of the chain the wallet sends on (NAME@CHAIN=FILE);
	// empty: the lane's one chain.
	Chain string
	// Path is the keystore file (encrypted JSON).
	Path string
}

// String is the spec as the flag takes it: NAME=PATH.
func (s KeystoreSpec) String() string {
	if s.Chain != "" {
		return s.Name + "@" + s.Chain + "=" + s.Path
	}
	return s.Name + "=" + s.Path
}

// ParseKeystoreSpec parses NAME=KEYSTORE_FILE or NAME@CHAIN=KEYSTORE_FILE.
func ParseKeystoreSpec(v string) (KeystoreSpec, error) {
	name, path, ok := strings.Cut(strings.TrimSpace(v), "=")
	name, path = strings.TrimSpace(name), strings.TrimSpace(path)
	name, chain, onChain := strings.Cut(name, "@")
	switch {
	case !ok || path == "":
		return KeystoreSpec{}, fmt.Errorf("wallet %q: want NAME=KEYSTORE_FILE or NAME@CHAIN=KEYSTORE_FILE", v)
	case onChain && !ValidID(chain):
		return KeystoreSpec{}, fmt.Errorf("wallet %q: %q is not a chain's name", name, chain)
	case !ValidID(name):
		return KeystoreSpec{}, fmt.Errorf("wallet %q: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	case envSuffix(name) == "FILE":
		// LEDGERQ_WALLET_PASSPHRASE_FILE is --wallet-passphrase-file's
		// variable, so it cannot also be this wallet's passphrase.
		return KeystoreSpec{}, fmt.Errorf("wallet %q: the name is reserved (its passphrase variable would be LEDGERQ_WALLET_PASSPHRASE_FILE, the passphrase file's)", name)
	}
	return KeystoreSpec{Name: name, Chain: chain, Path: path}, nil
}

// KeystoreSpecs is the repeatable --wallet-keystore flag (a flag.Value). Each value
// is NAME=KEYSTORE_FILE or a comma-separated list of them, so that one
// environment variable can name several wallets; a keystore path therefore
// cannot hold a comma.
type KeystoreSpecs []KeystoreSpec

// String lists the specs, comma-separated.
func (l *KeystoreSpecs) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, s := range *l {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// Set adds the specs of v.
func (l *KeystoreSpecs) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		s, err := ParseKeystoreSpec(part)
		if err != nil {
			return err
		}
		*l = append(*l, s)
	}
	return nil
}

// PassphraseFiles is the repeatable --wallet-passphrase-file flag (a
// flag.Value): FILE for every wallet, or NAME=FILE for one. A value is
// NAME=FILE when the text before its first '=' is a wallet name; write a
// file whose name holds '=' as ./a=b.
type PassphraseFiles struct {
	// All is the passphrase file of every wallet without one of its own.
	All string
	// ByName are the wallets' own passphrase files.
	ByName map[string]string
}

// String lists the files, comma-separated.
func (p *PassphraseFiles) String() string {
	if p == nil {
		return ""
	}
	var parts []string
	if p.All != "" {
		parts = append(parts, p.All)
	}
	for name, file := range p.ByName {
		parts = append(parts, name+"="+file)
	}
	return strings.Join(parts, ",")
}

// Set records the files of v, one or a comma-separated list (so that one
// environment variable can give several; a path therefore cannot hold a
// comma).
func (p *PassphraseFiles) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		if err := p.set(strings.TrimSpace(part)); err != nil {
			return err
		}
	}
	return nil
}

func (p *PassphraseFiles) set(v string) error {
	if name, file, ok := strings.Cut(v, "="); ok && ValidID(name) {
		if file == "" {
			return fmt.Errorf("passphrase file of wallet %q: empty path", name)
		}
		if p.ByName == nil {
			p.ByName = map[string]string{}
		}
		p.ByName[name] = file
		return nil
	}
	if p.All != "" && p.All != v {
		return fmt.Errorf("passphrase files %s and %s are both for every wallet: give NAME=FILE for all but one", p.All, v)
	}
	p.All = v
	return nil
}

// KeystoreConfig is what LoadKeystores unlocks.
type KeystoreConfig struct {
	// ChainID is the chain a wallet that names none sends on.
	ChainID int64
	// Chains are the declared chains' ids by name, for the wallets that
	// name theirs (NAME@CHAIN=FILE).
	Chains map[string]int64
	// Wallets are the keystore files, by wallet name.
	Wallets []KeystoreSpec
	// PassphraseFiles are the passphrase files given.
	PassphraseFiles PassphraseFiles
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger logs each wallet loaded (name, address, file, and where its
	// passphrase came from; never the passphrase or the key). Nil discards.
	Logger *slog.Logger
}

// LoadKeystores decrypts every keystore file of cfg with its passphrase and
// returns the registry of the wallets, all on cfg.ChainID. An error names the
// wallet and the file, and where the passphrase was read from, never the
// passphrase.
func LoadKeystores(cfg KeystoreConfig) (*Registry, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	bySuffix := map[string]string{}
	ws := make([]Wallet, 0, len(cfg.Wallets))
	for _, spec := range cfg.Wallets {
		if other, dup := bySuffix[envSuffix(spec.Name)]; dup && other != spec.Name {
			return nil, fmt.Errorf("wallets %q and %q would share the passphrase variable %s: rename one", other, spec.Name, PassphraseEnv(spec.Name))
		}
		bySuffix[envSuffix(spec.Name)] = spec.Name
		chainID := cfg.ChainID
		if spec.Chain != "" {
			id, ok := cfg.Chains[spec.Chain]
			if !ok {
				return nil, fmt.Errorf("wallet %q: chain %q is not declared (--wallet-chain)", spec.Name, spec.Chain)
			}
			chainID = id
		}
		if chainID == 0 {
			return nil, fmt.Errorf("wallet %q: name its chain (NAME@CHAIN=FILE): several chains are declared", spec.Name)
		}
		pass, from, err := passphraseFor(spec.Name, cfg.PassphraseFiles, lookup)
		if err != nil {
			return nil, err
		}
		logger.Debug("wallet: unlocking keystore", "wallet", spec.Name, "file", spec.Path, "passphrase_from", from)
		signer, err := OpenKeystore(spec.Path, pass)
		if err != nil {
			if errors.Is(err, ErrWrongPassphrase) {
				return nil, fmt.Errorf("wallet %q: %w (passphrase read from %s)", spec.Name, err, from)
			}
			return nil, fmt.Errorf("wallet %q: %w", spec.Name, err)
		}
		logger.Info("wallet: loaded", "wallet", spec.Name, "chain_id", chainID, "address", common.Address(signer.Address()).Hex(),
			"file", spec.Path, "passphrase_from", from)
		ws = append(ws, Wallet{ID: spec.Name, ChainID: chainID, Signer: signer})
	}
	return NewRegistry(ws...)
}

// passphraseFor finds wallet name's passphrase (see the package's keystore
// notes for the order) and says where it came from.
func passphraseFor(name string, files PassphraseFiles, lookup func(string) (string, bool)) (pass, from string, err error) {
	if file := files.ByName[name]; file != "" {
		pass, err := ReadPassphraseFile(file)
		if err != nil {
			return "", "", fmt.Errorf("wallet %q: %w", name, err)
		}
		return pass, "file " + file, nil
	}
	if v, ok := lookup(PassphraseEnv(name)); ok && v != "" {
		return v, "environment variable " + PassphraseEnv(name), nil
	}
	if files.All != "" {
		pass, err := ReadPassphraseFile(files.All)
		if err != nil {
			return "", "", fmt.Errorf("wallet %q: %w", name, err)
		}
		return pass, "file " + files.All, nil
	}
	if v, ok := lookup(PassphraseEnvAll); ok && v != "" {
		return v, "environment variable " + PassphraseEnvAll, nil
	}
	return "", "", fmt.Errorf("wallet %q: no passphrase: set %s or %s, or give --wallet-passphrase-file", name, PassphraseEnv(name), PassphraseEnvAll)
}

// maxPassphraseFile bounds how much of a passphrase file is read.
const maxPassphraseFile = 64 << 10

// ReadPassphraseFile returns the first line of file (without its line
// ending), as geth reads its --password file.
func ReadPassphraseFile(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("reading passphrase file: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, maxPassphraseFile))
	line, err := r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading passphrase file %s: %w", file, err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// ErrWrongPassphrase is OpenKeystore's error when the passphrase does not
// decrypt the file.
var ErrWrongPassphrase = errors.New("wrong passphrase")

// maxKeystoreFile bounds how much of a keystore file is read: they are
// well under a kilobyte.
const maxKeystoreFile = 1 << 20

// OpenKeystore decrypts the go-ethereum keystore file at path with
// passphrase and returns a signer for its key. Its errors name the file and
// never hold the passphrase or the file's content.
func OpenKeystore(path, passphrase string) (*KeySigner, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading keystore: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeystoreFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading keystore %s: %w", path, err)
	}
	if len(data) > maxKeystoreFile {
		return nil, fmt.Errorf("keystore %s: larger than %d bytes: not a keystore file", path, maxKeystoreFile)
	}
	// Checked here rather than left to DecryptKey, whose JSON errors quote
	// the file's text: a plain private key saved by mistake must not end up
	// in a message.
	var head struct {
		Address string          `json:"address"`
		Crypto  json.RawMessage `json:"crypto"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("keystore %s: not JSON (syntax error at byte %d): not a keystore file", path, syn.Offset)
		}
		return nil, fmt.Errorf("keystore %s: not a keystore file (encrypted JSON with address and crypto)", path)
	}
	if len(head.Crypto) == 0 || bytes.Equal(head.Crypto, []byte("null")) {
		// A "Crypto" key (version 1 files) is read as crypto too: JSON
		// field names match without case here.
		return nil, fmt.Errorf("keystore %s: no crypto section: not an encrypted keystore file", path)
	}
	key, err := gethkeystore.DecryptKey(data, passphrase)
	switch {
	case errors.Is(err, gethkeystore.ErrDecrypt):
		return nil, fmt.Errorf("keystore %s: %w", path, ErrWrongPassphrase)
	case err != nil:
		return nil, fmt.Errorf("keystore %s: cannot decrypt: %w", path, err)
	}
	if head.Address != "" {
		if !common.IsHexAddress(head.Address) || common.HexToAddress(head.Address) != key.Address {
			return nil, fmt.Errorf("keystore %s: holds the key of %s, not of the address %q it names", path, key.Address.Hex(), head.Address)
		}
	}
	return NewKeySigner(key.PrivateKey)
}

// KeystoreAddress returns the address a go-ethereum keystore file names in
// its "address" field, without decrypting it: for commands that only read
// what a wallet did (ledgerq wallet audit) and need no passphrase. Only
// OpenKeystore proves the file holds that address's key.
func KeystoreAddress(path string) (ledger.Address, error) {
	f, err := os.Open(path)
	if err != nil {
		return ledger.Address{}, fmt.Errorf("reading keystore: %w", err)
	}
	defer f.Close()
	var head struct {
		Address string `json:"address"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxKeystoreFile)).Decode(&head); err != nil {
		return ledger.Address{}, fmt.Errorf("keystore %s: not a keystore file (JSON with an address)", path)
	}
	a := head.Address
	if !strings.HasPrefix(a, "0x") && !strings.HasPrefix(a, "0X") {
		a = "0x" + a
	}
	if head.Address == "" || !common.IsHexAddress(a) {
		return ledger.Address{}, fmt.Errorf("keystore %s: names no address", path)
	}
	return ledger.Address(common.HexToAddress(a)), nil
}

// ScryptParams are the scrypt cost parameters of a new keystore file.
type ScryptParams struct{ N, P int }

var (
	// StandardScrypt is geth's default: about 256 MB and a second of CPU to
	// unlock.
	StandardScrypt = ScryptParams{N: gethkeystore.StandardScryptN, P: gethkeystore.StandardScryptP}
	// LightScrypt is geth's --lightkdf: about 4 MB and a few milliseconds;
	// for development and tests.
	LightScrypt = ScryptParams{N: gethkeystore.LightScryptN, P: gethkeystore.LightScryptP}
)

// NewKeystore generates a private key and writes it, encrypted with
// passphrase, as a go-ethereum keystore file into dir (created 0700 if
// missing; the file is 0600), named as geth names them
// (UTC--<time>--<address>). It returns the address and the file.
func NewKeystore(dir, passphrase string, params ScryptParams) (ledger.Address, string, error) {
	acct, err := gethkeystore.StoreKey(dir, passphrase, params.N, params.P)
	if err != nil {
		return ledger.Address{}, "", fmt.Errorf("writing a new keystore into %s: %w", dir, err)
	}
	return ledger.Address(acct.Address), acct.URL.Path, nil
}

// DevWallet is a development wallet's files (EnsureDevWallet).
type DevWallet struct {
	Spec KeystoreSpec
	// PassphraseFile holds the keystore's passphrase.
	PassphraseFile string
	Address        ledger.Address
	// Created says the files were made now rather than found.
	Created bool
}

// EnsureDevWallet returns the development wallet name kept in dir
// (<name>.json and <name>.passphrase), creating both, with a random
// passphrase and light scrypt parameters, when the keystore is missing.
// `ledgerq dev` uses it, so that a second run keeps the wallet (and its
// funds on a persistent dev chain).
func EnsureDevWallet(dir, name string) (DevWallet, error) {
	if !ValidID(name) {
		return DevWallet{}, fmt.Errorf("dev wallet %q: not a wallet name", name)
	}
	spec := KeystoreSpec{Name: name, Path: filepath.Join(dir, name+".json")}
	passFile := filepath.Join(dir, name+".passphrase")
	dw := DevWallet{Spec: spec, PassphraseFile: passFile}
	if _, err := os.Stat(spec.Path); errors.Is(err, os.ErrNotExist) {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return DevWallet{}, fmt.Errorf("generating a passphrase: %w", err)
		}
		pass := base64.RawURLEncoding.EncodeToString(raw[:])
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return DevWallet{}, fmt.Errorf("creating %s: %w", dir, err)
		}
		// The passphrase file is replaced: one left by a run that stopped
		// before writing the keystore belongs to no key.
		if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
			return DevWallet{}, fmt.Errorf("writing the passphrase file: %w", err)
		}
		_, file, err := NewKeystore(dir, pass, LightScrypt)
		if err != nil {
			return DevWallet{}, err
		}
		// Link, not rename: a keystore that appeared meanwhile is kept.
		err = os.Link(file, spec.Path)
		_ = os.Remove(file)
		if err != nil {
			return DevWallet{}, fmt.Errorf("naming the dev keystore: %w", err)
		}
		dw.Created = true
	} else if err != nil {
		return DevWallet{}, fmt.Errorf("reading keystore: %w", err)
	}
	pass, err := ReadPassphraseFile(passFile)
	if err != nil {
		return DevWallet{}, err
	}
	signer, err := OpenKeystore(spec.Path, pass)
	if err != nil {
		return DevWallet{}, fmt.Errorf("dev wallet %q: %w", name, err)
	}
	dw.Address = signer.Address()
	return dw, nil
}

// PassphraseFor finds wallet name's passphrase as LoadKeystores does (see
// the package's keystore notes for the order; nil lookup reads the
// environment) and says where it came from, never what it is.
func PassphraseFor(name string, files PassphraseFiles, lookup func(string) (string, bool)) (pass, from string, err error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return passphraseFor(name, files, lookup)
}
