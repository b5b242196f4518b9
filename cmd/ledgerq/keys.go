package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
)

const keysUsage = `Usage: ledgerq keys <command> [flags]

API keys open the wallet routes (/v1/wallets/{wallet}/…, /wallet/tasks/…) of the
wallets they are scoped to; clients send them as Authorization: Bearer <key> or
X-API-Key: <key>. ledgerq stores only each key's SHA-256.

Commands:
  create   create a key: ledgerq keys create --name NAME --wallet W [--wallet W2 …];
           prints the key once (stdout), its id and scope (stderr)
  list     list the keys (--all: with the revoked ones)
  revoke   revoke a key: ledgerq keys revoke ID

Run 'ledgerq keys <command> --help' for the flags of a command.
`

const walletUsage = `Usage: ledgerq wallet <command> [flags]

Commands:
  new     create a new key and print its address and how serve uses it:
          a go-ethereum keystore file (encrypted private key):
            ledgerq wallet new --keystore-dir DIR [--light-kdf] [--name NAME]
          a key on a PKCS#11 token (an HSM), PIN from --pin-file or LEDGERQ_PKCS11_PIN:
            ledgerq wallet new --backend pkcs11 --pkcs11-module PATH --pkcs11-token TOKEN --label LABEL
          a key in AWS KMS:
            ledgerq wallet new --backend awskms --kms-region REGION [--alias NAME]
  audit   hold a wallet's record in the database against its chain's blocks
          and list each exception with what to do (exit status 3 on any):
          ledgerq wallet audit --wallet W [--from-block N] [--json]

Run 'ledgerq wallet <command> --help' for the flags of a command.
`

// runKeys runs the API key commands.
func runKeys(ctx context.Context, args []string) error {
	return keysCommand(ctx, args, os.Stdout, os.Stderr)
}

func keysCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	run := func(cmd func(context.Context, []string, io.Writer, io.Writer) error) func([]string) error {
		return func(args []string) error { return cmd(ctx, args, stdout, stderr) }
	}
	return subcommand("ledgerq keys", "command", keysUsage, args, stdout, stderr, map[string]func([]string) error{
		"create": run(runKeysCreate), "list": run(runKeysList), "revoke": run(runKeysRevoke),
	})
}

// keysFlags are the flags every keys command takes: the database.
type keysFlags struct {
	databaseURL string
}

// newKeysFlagSet registers the database flag. The environment fills only
// it (envFlags): a command's own flags, such as --wallet, are per call,
// and LEDGERQ_WALLET is serve's keystore list (the old name of
// LEDGERQ_WALLET_KEYSTORE).
func newKeysFlagSet(name, summary string, stderr io.Writer) (*flag.FlagSet, *keysFlags) {
	kf := &keysFlags{}
	fs := newFlagSet(name, summary)
	fs.SetOutput(stderr)
	fs.StringVar(&kf.databaseURL, "database-url", "", "PostgreSQL connection URL")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: ledgerq %s [flags]\n\n%s\n\nFlags (only --database-url is read from the environment, from the variables shown):\n", name, summary)
		fs.VisitAll(func(f *flag.Flag) {
			def, env := "", ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			if f.Name == "database-url" {
				env = " [" + envName(f.Name) + "]"
			}
			fmt.Fprintf(out, "  --%s\t%s%s%s\n", f.Name, f.Usage, def, env)
		})
	}
	return fs, kf
}

// envFlags fills the flags names that the command line did not set from
// their environment variables, as parseFlags does for every flag.
func envFlags(fs *flag.FlagSet, names ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && !set[n] {
			env.Var(f.Value, f.Name, f.Usage)
		}
	}
	return applyEnv(env)
}

// parseKeysFlags parses args; it returns the positional arguments.
func parseKeysFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := envFlags(fs, "database-url"); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

// openStore connects to the database at url and checks that it answers
// (the commands that work on the database directly: keys, migrate).
func openStore(ctx context.Context, url string) (*store.Store, error) {
	if url == "" {
		return nil, errors.New("no database: set DATABASE_URL or --database-url")
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.Ping(pingCtx); err != nil {
		st.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %w", node.RedactURL(url), err)
	}
	return st, nil
}

// notMigrated adds the remedy to an error from a database without the
// api_keys table.
func notMigrated(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return fmt.Errorf("%w (the database is not migrated: run ledgerq migrate up)", err)
	}
	return err
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKeysFlagSet("keys create", "Create an API key with one or more scopes. The key is printed once, alone on stdout\n(so that KEY=$(ledgerq keys create …) keeps it); its id and scopes go to stderr. ledgerq stores only\nits SHA-256: a lost key cannot be shown again, only revoked and replaced.\n\nScopes: wallet:NAME (that wallet's routes), service:ID or service:* (posting and reading the\nbatches of that service, or of any), pool:write (sending transactions to the builder lane's pool),\nread (every read route, /metrics and the console's pages), admin (everything, the console's\nactions included).", stderr)
	name := fs.String("name", "", "what the key is for (who or what uses it); required")
	var scopes, wallets stringsFlag
	fs.Var(&scopes, "scope", "a scope of the key (repeatable, or comma-separated): wallet:NAME, service:ID, service:*, pool:write, read or admin; at least one scope or wallet")
	fs.Var(&wallets, "wallet", "a wallet the key may use: the same as --scope wallet:NAME (repeatable, or comma-separated)")
	asJSON := fs.Bool("json", false, "print the key, its id, name and scopes as one JSON object on stdout")
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case *name == "":
		return errors.New("--name is required (what the key is for)")
	case !utf8.ValidString(*name) || strings.ContainsRune(*name, 0) || utf8.RuneCountInString(*name) > 256:
		return errors.New("--name must be at most 256 characters of UTF-8 text without NUL")
	case len(scopes)+len(wallets) == 0:
		return errors.New("--scope (or --wallet) is required: what the key may open")
	}
	var parsed []store.Scope
	for _, w := range wallets {
		if !keystore.ValidID(w) {
			return fmt.Errorf("--wallet %q: a wallet name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", w)
		}
		parsed = append(parsed, store.WalletScope(w))
	}
	for _, sc := range scopes {
		p, err := store.ParseScope(sc)
		if err != nil {
			return fmt.Errorf("--scope: %w", err)
		}
		parsed = append(parsed, p)
	}
	st, err := openStore(ctx, kf.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	key, token, err := st.APIKeyCreate(ctx, store.APIKeyCreateParams{Now: time.Now(), Name: *name, Scopes: parsed})
	if err != nil {
		return notMigrated(err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			ID     string        `json:"id"`
			Name   string        `json:"name"`
			Scopes []store.Scope `json:"scopes"`
			Key    string        `json:"key"`
		}{key.ID, key.Name, key.Scopes, token})
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "ledgerq keys: created key %s (%q) with scopes %s.\n"+
		"The key above is shown this once; ledgerq keeps only its hash. Send it as\n"+
		"  Authorization: Bearer <key>   (or X-API-Key: <key>)\n", key.ID, key.Name, store.JoinScopes(key.Scopes, ", "))
	return nil
}

func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKeysFlagSet("keys list", "List the API keys, oldest first (never the keys themselves: ledgerq does not have them).", stderr)
	all := fs.Bool("all", false, "include revoked keys")
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	st, err := openStore(ctx, kf.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.APIKeyList(ctx, *all)
	if err != nil {
		return notMigrated(err)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSCOPES\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, store.JoinScopes(k.Scopes, ","), k.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return w.Flush()
}

func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKeysFlagSet("keys revoke", "Revoke an API key: ledgerq keys revoke ID. From then on it is refused (401).", stderr)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return errors.New("want one key id (see ledgerq keys list)")
	}
	st, err := openStore(ctx, kf.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	key, revoked, err := st.APIKeyRevoke(ctx, store.APIKeyRevokeParams{Now: time.Now(), ID: rest[0]})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no key %q (see ledgerq keys list --all)", rest[0])
	case err != nil:
		return notMigrated(err)
	case !revoked:
		fmt.Fprintf(stdout, "key %s (%q) was already revoked at %s\n", key.ID, key.Name, key.RevokedAt.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(stdout, "revoked key %s (%q)\n", key.ID, key.Name)
	}
	return nil
}

// runWallet runs the wallet commands.
func runWallet(ctx context.Context, args []string) error {
	return walletCommand(ctx, args, os.Stdout, os.Stderr, os.LookupEnv)
}

func walletCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	return subcommand("ledgerq wallet", "command", walletUsage, args, stdout, stderr, map[string]func([]string) error{
		"new":   func(args []string) error { return runWalletNew(ctx, args, stdout, stderr, lookupEnv) },
		"audit": func(args []string) error { return runWalletAudit(ctx, args, stdout, stderr) },
	})
}

// runWalletNew makes a new key in the backend --backend names: a keystore
// file (the default), a PKCS#11 token or AWS KMS; it prints the key's
// address and reference, and the declaration that makes serve use it.
// Secrets (the passphrase, the PIN) come from a file or the environment,
// never from the command line, where other users of the machine could
// read them.
func runWalletNew(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	fs := newFlagSet("wallet new", "Create a new private key in --backend and print its address (fund it before sending), where\nit is, and the declaration that makes ledgerq use it.\n\n"+
		"keystore (the default): write it, encrypted, as a go-ethereum keystore file (the format geth\nand clef read) into --keystore-dir. The passphrase is the first line of --passphrase-file,\nelse LEDGERQ_WALLET_PASSPHRASE_<NAME> (with --name), else LEDGERQ_WALLET_PASSPHRASE.\n\n"+
		"pkcs11: generate it on an HSM's token (--pkcs11-module, --pkcs11-token or --pkcs11-slot,\n--label, --id): sensitive and never extractable. The PIN is the first line of --pin-file, else\n"+pkcs11PINEnv+". Needs a cgo build of ledgerq.\n\n"+
		"awskms: create an ECC_SECG_P256K1 signing key in AWS KMS (--kms-region, --kms-endpoint,\n--alias, --description), with the credentials of the AWS SDK's default chain (the environment,\nthe shared files, a role).")
	fs.SetOutput(stderr)
	backend := fs.String("backend", "keystore", "where the key is made: keystore, pkcs11 or awskms")
	name := fs.String("name", "", "the wallet's name in ledgerq, for the printed declaration (and, for keystore, LEDGERQ_WALLET_PASSPHRASE_<NAME>)")
	dir := fs.String("keystore-dir", "", "keystore: directory to write the keystore file into (created 0700 if missing); required")
	passFile := fs.String("passphrase-file", "", "keystore: file whose first line is the passphrase")
	light := fs.Bool("light-kdf", false, "keystore: encrypt with light scrypt parameters (4 MB, fast; geth's --lightkdf) instead of the standard ones (256 MB, about a second to unlock): for development")
	var p11 pkcs11Flags
	fs.StringVar(&p11.module, "pkcs11-module", "", "pkcs11: the path of the HSM vendor's PKCS#11 library (.so); required")
	fs.StringVar(&p11.token, "pkcs11-token", "", "pkcs11: the token's label (or --pkcs11-slot)")
	fs.StringVar(&p11.slot, "pkcs11-slot", "", "pkcs11: the token's slot number (or --pkcs11-token)")
	fs.StringVar(&p11.label, "label", "", "pkcs11: the new key's CKA_LABEL, which serve names the key by; required")
	fs.StringVar(&p11.id, "id", "", "pkcs11: the new key's CKA_ID in hex (default: 16 random bytes)")
	fs.StringVar(&p11.pinFile, "pin-file", "", "pkcs11: file whose first line is the token's user PIN (else "+pkcs11PINEnv+")")
	var kmsf kmsFlags
	fs.StringVar(&kmsf.region, "kms-region", "", "awskms: the region to create the key in; required")
	fs.StringVar(&kmsf.endpoint, "kms-endpoint", "", "awskms: a KMS-compatible server's URL instead of AWS's endpoint of the region")
	fs.StringVar(&kmsf.alias, "alias", "", "awskms: an alias for the key (alias/NAME)")
	fs.StringVar(&kmsf.description, "description", "", "awskms: the key's description in KMS")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := flagsOfBackend(fs, *backend); err != nil {
		return err
	}
	if *name != "" && !keystore.ValidID(*name) {
		return fmt.Errorf("--name %q: a wallet name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", *name)
	}
	switch *backend {
	case "keystore":
		return newKeystoreWallet(*dir, *passFile, *light, *name, stdout, stderr, lookupEnv)
	case "pkcs11":
		return newPKCS11Wallet(ctx, p11, *name, stdout, stderr, lookupEnv)
	case "awskms":
		return newKMSWallet(ctx, kmsf, *name, stdout, stderr)
	}
	return fmt.Errorf("--backend %q: want keystore, pkcs11 or awskms", *backend)
}

// newKeystoreWallet writes a new keystore file, encrypted with a passphrase
// read from passFile or the environment, and prints its address and path.
func newKeystoreWallet(dir, passFile string, light bool, name string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) error {
	if dir == "" {
		return errors.New("--keystore-dir is required")
	}
	pass, from, err := newWalletPassphrase(passFile, name, lookupEnv)
	if err != nil {
		return err
	}
	params := keystore.StandardScrypt
	if light {
		params = keystore.LightScrypt
	}
	addr, path, err := keystore.NewKeystore(dir, pass, params)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "address:  %s\nkeystore: %s\n", common.Address(addr).Hex(), path)
	n := walletNewName(name)
	fmt.Fprintf(stderr, "ledgerq wallet new: encrypted with the passphrase from %s. To send from it:\n"+
		"  ledgerq serve --wallet-keystore %s=%s --wallet-passphrase-file %s=<passphrase file>\n"+
		"  (or the passphrase in %s)\n", from, n, path, n, keystore.PassphraseEnv(n))
	if pass == "" {
		fmt.Fprintln(stderr, "ledgerq wallet new: warning: the passphrase is empty: anyone who reads the file has the key")
	}
	return nil
}

func newWalletPassphrase(file, name string, lookupEnv func(string) (string, bool)) (pass, from string, err error) {
	if file != "" {
		pass, err := keystore.ReadPassphraseFile(file)
		if err != nil {
			return "", "", err
		}
		return pass, "file " + file, nil
	}
	if name != "" {
		if v, ok := lookupEnv(keystore.PassphraseEnv(name)); ok && v != "" {
			return v, keystore.PassphraseEnv(name), nil
		}
	}
	if v, ok := lookupEnv(keystore.PassphraseEnvAll); ok && v != "" {
		return v, keystore.PassphraseEnvAll, nil
	}
	return "", "", fmt.Errorf("no passphrase: give --passphrase-file or set %s", keystore.PassphraseEnvAll)
}
