// Package softhsmtest makes SoftHSM2 tokens and keys for tests, with the
// tools Debian ships (softhsm2-util from softhsm2, pkcs11-tool from opensc),
// not ledgerq's code: what a key made by an operator looks like is what the
// signer must read.
//
// SoftHSM2 reads its configuration file, SOFTHSM2_CONF, when the library
// is initialised, and the library is initialised once per process: New sets
// the variable for the test (t.Setenv, so such tests cannot run in
// parallel) before anything loads the module, and the signers of the test
// must all be closed by its end (the last Close finalises the module) so
// that the next test's initialisation reads its own configuration.
//
// Without softhsm2-util, pkcs11-tool or the module the test is skipped,
// except under CI=true, where it fails: CI installs them so that these
// tests run for real. Only tests import this package.
package softhsmtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

const (
	// EnvModule names the environment variable holding SoftHSM2's PKCS#11
	// library, DefaultModule when unset.
	EnvModule = "LEDGERQ_TEST_SOFTHSM_MODULE"
	// DefaultModule is where Debian's softhsm2 package puts the library.
	DefaultModule = "/usr/lib/softhsm/libsofthsm2.so"
	// InstallCommand installs the tools on Debian.
	InstallCommand = "apt-get install -y softhsm2 opensc"

	// PIN and SOPIN are the test token's user and security officer PINs.
	PIN   = "1234"
	SOPIN = "5678"
)

// Token is a fresh SoftHSM2 token in a private token directory.
type Token struct {
	// Module is the PKCS#11 library's path.
	Module string
	// Label is the token's label.
	Label string
	// PIN is the user PIN.
	PIN string
}

// New makes a token labelled label in a new token directory under
// t.TempDir() and points SOFTHSM2_CONF at it for t.
func New(t testing.TB, label string) *Token {
	t.Helper()
	module := Module(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatalf("softhsmtest: %v", err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	text := fmt.Sprintf("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n", tokens)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("softhsmtest: %v", err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	run(t, "softhsm2-util", "--init-token", "--free", "--label", label, "--pin", PIN, "--so-pin", SOPIN)
	return &Token{Module: module, Label: label, PIN: PIN}
}

// NewKey makes an EC key pair on the token with pkcs11-tool: curve as
// pkcs11-tool names it ("secp256k1", "prime256v1"), the key's label and
// id. pkcs11-tool makes the private key sensitive and not extractable.
func (tok *Token) NewKey(t testing.TB, curve, label string, id []byte) {
	t.Helper()
	run(t, "pkcs11-tool", "--module", tok.Module, "--token-label", tok.Label, "--login", "--pin", tok.PIN,
		"--keypairgen", "--key-type", "EC:"+curve, "--label", label, "--id", hex.EncodeToString(id))
}

// SetPIN changes the token's user PIN to pin with pkcs11-tool, for a test
// that looks for the PIN in what a program wrote and needs one that cannot
// occur there by chance.
func (tok *Token) SetPIN(t testing.TB, pin string) {
	t.Helper()
	run(t, "pkcs11-tool", "--module", tok.Module, "--token-label", tok.Label, "--login", "--pin", tok.PIN, "--change-pin", "--new-pin", pin)
	tok.PIN = pin
}

// Module returns SoftHSM2's library, after checking that softhsm2-util and
// pkcs11-tool are installed; it skips t without them, or fails it under CI.
func Module(t testing.TB) string {
	t.Helper()
	module := os.Getenv(EnvModule)
	if module == "" {
		module = DefaultModule
	}
	var missing []string
	for _, tool := range []string{"softhsm2-util", "pkcs11-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(module); err != nil {
		missing = append(missing, module)
	}
	if len(missing) == 0 {
		return module
	}
	if testnode.InCI() {
		t.Fatalf("softhsmtest: CI=true and %v missing (install with %s; %s names the module)", missing, InstallCommand, EnvModule)
	}
	t.Skipf("softhsmtest: skipped: %v missing (install with %s; %s names the module)", missing, InstallCommand, EnvModule)
	return ""
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("softhsmtest: %s %v: %v\n%s", name, args, err, out)
	}
}
