//go:build cgo

package main

import (
	"context"
	"encoding/hex"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
)

// The PKCS#11 tests cannot run in parallel: SoftHSM2 reads SOFTHSM2_CONF,
// set per test, when the process initialises it (softhsmtest).

// testPIN is the tokens' PIN here: letters that no hex address, id or
// key id can hold, so that finding it in the output is never chance.
const testPIN = "pin-Quartz-Vellum-42"

func pkcs11Token(t *testing.T) *softhsmtest.Token {
	t.Helper()
	tok := softhsmtest.New(t, "ledgerq-cli")
	tok.SetPIN(t, testPIN)
	return tok
}

// noPIN fails t when the PIN is in any of texts.
func noPIN(t *testing.T, texts ...string) {
	t.Helper()
	for _, text := range texts {
		if strings.Contains(text, testPIN) {
			t.Errorf("the PIN is in %q", text)
		}
	}
}

// ledgerq wallet new --backend pkcs11 generates a key on the token that
// Open finds by the printed label and id and that signs for the printed
// address; it prints the declaration that names it, and never the PIN.
func TestWalletNew_PKCS11GeneratesAKeyThatSignsForThePrintedAddressAndPrintsItsDeclaration(t *testing.T) {
	tok := pkcs11Token(t)
	pinFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pinFile, []byte(testPIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, label string
		args        []string
		env         map[string]string
		wantID      string // empty: a random 16 bytes
		wantDecl    string
	}{
		{"PIN from the environment, random id", "hot", nil, map[string]string{pkcs11PINEnv: testPIN}, "",
			"--wallet-pkcs11-module " + tok.Module + " --wallet-pkcs11-token " + tok.Label + " --wallet-signer name=hot,chain=CHAIN,backend=pkcs11,key=hot,address="},
		{"PIN from a file, given id", "cold", []string{"--pin-file", pinFile, "--id", "0a0b"}, nil, "0a0b",
			"--wallet-pkcs11-module " + tok.Module + " --wallet-pkcs11-token " + tok.Label + " --wallet-pkcs11-pin-file " + pinFile + " --wallet-signer name=cold,chain=CHAIN,backend=pkcs11,key=cold,address="},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--backend", "pkcs11", "--pkcs11-module", tok.Module, "--pkcs11-token", tok.Label, "--label", tc.label, "--name", tc.label}, tc.args...)
			out, notes, err := walletNew(t, tc.env, args...)
			noPIN(t, out, notes)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`^address:  (0x[0-9a-fA-F]{40})\npkcs11:   label ` + tc.label + ` \(id ([0-9a-f]+)\) on token ` + tok.Label + `\n$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("stdout %q", out)
			}
			addr := common.HexToAddress(m[1])
			id, _ := hex.DecodeString(m[2])
			if tc.wantID != "" && m[2] != tc.wantID || tc.wantID == "" && len(id) != pkcs11.IDSize {
				t.Errorf("id %s, want %q (or %d random bytes)", m[2], tc.wantID, pkcs11.IDSize)
			}
			for _, want := range []string{
				"\n  ledgerq serve " + tc.wantDecl + addr.Hex() + "\n",
				`-d '{"name":"` + tc.label + `","chain":"CHAIN","backend":"pkcs11","key":"` + tc.label + `","address":"` + addr.Hex() + `"}'` + "\n",
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("stderr lacks %q:\n%s", want, notes)
				}
			}
			if tc.env != nil && !strings.Contains(notes, "(the PIN in "+pkcs11PINEnv+")") {
				t.Errorf("stderr does not say where the PIN goes:\n%s", notes)
			}
			// By the label alone, as the declaration names it, and by the id.
			for _, cfg := range []pkcs11.Config{{Label: tc.label}, {ID: id}} {
				cfg.Module, cfg.Token, cfg.PIN, cfg.Address = tok.Module, tok.Label, tok.PIN, addr
				s, err := pkcs11.Open(context.Background(), cfg)
				if err != nil {
					t.Fatalf("Open %v: %v", cfg, err)
				}
				cid := big.NewInt(1337)
				signed, err := s.SignTx(context.Background(), types.NewTx(&types.DynamicFeeTx{ChainID: cid, Gas: 21000, To: &addr, GasFeeCap: big.NewInt(1e9)}), cid)
				s.Close()
				if err != nil {
					t.Fatal(err)
				}
				if from, err := types.Sender(types.LatestSignerForChainID(cid), signed); err != nil || from != addr {
					t.Fatalf("the transaction recovers to %s (%v), want the printed %s", from.Hex(), err, addr.Hex())
				}
			}
		})
	}
}

func TestWalletNew_PKCS11BadInputIsAnErrorNamingTheFlagAndNeverThePIN(t *testing.T) {
	tok := pkcs11Token(t)
	env := map[string]string{pkcs11PINEnv: testPIN}
	base := func(drop string, extra ...string) []string {
		var args []string
		for _, kv := range [][2]string{{"--pkcs11-module", tok.Module}, {"--pkcs11-token", tok.Label}, {"--label", "k"}} {
			if kv[0] != drop {
				args = append(args, kv[0], kv[1])
			}
		}
		return append(append([]string{"--backend", "pkcs11"}, args...), extra...)
	}
	// The first key, which the duplicate below meets.
	if _, _, err := walletNew(t, env, base("")...); err != nil {
		t.Fatal(err)
	}
	wrongPINFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(wrongPINFile, []byte("pin-Wrong-Ochre-17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"no module", base("--pkcs11-module"), env, []string{"--pkcs11-module is required"}},
		{"no token", base("--pkcs11-token"), env, []string{"--pkcs11-token (the token's label) or --pkcs11-slot is required"}},
		{"no label", base("--label"), env, []string{"--label is required"}},
		{"a label with a comma", base("--label", "--label", "a,b"), env, []string{`--label "a,b"`}},
		{"a bad slot", base("--pkcs11-token", "--pkcs11-slot", "x"), env, []string{`--pkcs11-slot "x"`}},
		{"a bad id", base("", "--id", "zz"), env, []string{`--id "zz"`}},
		{"no PIN", base(""), nil, []string{"no PIN: give --pin-file FILE or set " + pkcs11PINEnv}},
		{"a wrong PIN from the environment", base("", "--label", "k2"), map[string]string{pkcs11PINEnv: "pin-Wrong-Ochre-17"}, []string{"CKR_PIN_INCORRECT", "the PIN came from " + pkcs11PINEnv}},
		{"a wrong PIN from a file", base("", "--label", "k2", "--pin-file", wrongPINFile), nil, []string{"CKR_PIN_INCORRECT", "the PIN came from --pin-file " + wrongPINFile}},
		{"a missing PIN file", base("", "--pin-file", filepath.Join(t.TempDir(), "none")), nil, []string{"--pin-file: open ", "no such file"}},
		{"a missing module", base("--pkcs11-module", "--pkcs11-module", "/nonexistent/lib.so"), env, []string{"--pkcs11-module: stat /nonexistent/lib.so"}},
		{"a missing token", base("--pkcs11-token", "--pkcs11-token", "absent"), env, []string{`no token labelled "absent"`}},
		{"a label the token has", base(""), env, []string{`already has an object with the label "k"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, notes, err := walletNew(t, tc.env, tc.args...)
			if err == nil {
				t.Fatalf("%q succeeded: %s", tc.args, out)
			}
			t.Log(err)
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q", want)
				}
			}
			noPIN(t, out, notes, err.Error())
			if strings.Contains(err.Error(), "pin-Wrong-Ochre-17") {
				t.Errorf("the error shows the wrong PIN")
			}
		})
	}
}
