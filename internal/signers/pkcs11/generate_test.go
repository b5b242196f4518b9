//go:build cgo

package pkcs11_test

import (
	"bytes"
	"context"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	p11 "github.com/miekg/pkcs11"

	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
)

// generated makes a token and generates a key labelled label on it with
// id (none: Generate's own).
func generated(t *testing.T, label string, id []byte) (*softhsmtest.Token, pkcs11.Config, common.Address) {
	t.Helper()
	tok := softhsmtest.New(t, tokenLabel)
	cfg := pkcs11.Config{Module: tok.Module, Token: tok.Label, Label: label, ID: id, PIN: tok.PIN}
	addr, err := pkcs11.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if addr == (common.Address{}) {
		t.Fatal("Generate returned the zero address")
	}
	return tok, cfg, addr
}

func TestGenerate_MakesASecp256k1KeyThatOpenFindsAndSignsWith(t *testing.T) {
	tok, cfg, addr := generated(t, "made-by-ledgerq", []byte{0xab, 0xcd})
	s, err := pkcs11.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if got := common.Address(s.Address()); got != addr {
		t.Fatalf("Open derives %s, Generate returned %s", got.Hex(), addr.Hex())
	}
	cid := big.NewInt(1337)
	signed, err := s.SignTx(context.Background(), transfer(types.DynamicFeeTxType, cid, 0), cid)
	if err != nil {
		t.Fatal(err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(cid), signed)
	if err != nil || from != addr {
		t.Fatalf("the transaction recovers to %s (%v), want %s", from.Hex(), err, addr.Hex())
	}
	attrs := privateKeyAttrs(t, tok, cfg.Label, p11.CKA_TOKEN, p11.CKA_PRIVATE, p11.CKA_SIGN, p11.CKA_ID)
	for _, a := range []uint{p11.CKA_TOKEN, p11.CKA_PRIVATE, p11.CKA_SIGN} {
		if !bytes.Equal(attrs[a], []byte{1}) {
			t.Errorf("the private key's attribute %#x is %x, want true", a, attrs[a])
		}
	}
	if !bytes.Equal(attrs[p11.CKA_ID], cfg.ID) {
		t.Errorf("the private key's id is %x, want %x", attrs[p11.CKA_ID], cfg.ID)
	}
	checkNeverLeaves(t, tok, cfg.Label)
}

func TestGenerate_WithoutAnIDGivesThePairARandomOneOpenFindsItBy(t *testing.T) {
	tok, cfg, addr := generated(t, "no-id", nil)
	id := privateKeyAttrs(t, tok, cfg.Label, p11.CKA_ID)[p11.CKA_ID]
	if len(id) != pkcs11.IDSize {
		t.Fatalf("the key's id is %x, want %d random bytes", id, pkcs11.IDSize)
	}
	// By the id alone: the public key carries it too.
	cfg.Label, cfg.ID = "", id
	s, err := pkcs11.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open by id %x: %v", id, err)
	}
	defer s.Close()
	if got := common.Address(s.Address()); got != addr {
		t.Fatalf("by id: %s, want %s", got.Hex(), addr.Hex())
	}
}

func TestGenerate_RefusesALabelOrAnIDTheTokenHasAlready(t *testing.T) {
	tok, cfg, addr := generated(t, "once", []byte{0x07})
	// A key made by pkcs11-tool, for a label that is not one of ours.
	tok.NewKey(t, "secp256k1", "theirs", []byte{0x08})
	for name, edit := range map[string]func(*pkcs11.Config){
		`label "once"`:   func(c *pkcs11.Config) { c.ID = []byte{0x09} },
		`label "theirs"`: func(c *pkcs11.Config) { c.Label, c.ID = "theirs", nil },
		"id 07":          func(c *pkcs11.Config) { c.Label = "other" },
	} {
		c := cfg
		edit(&c)
		_, err := pkcs11.Generate(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "already has an object with the "+name) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
		if err != nil && strings.Contains(err.Error(), tok.PIN) {
			t.Errorf("%s: the error shows the PIN", name)
		}
	}
	// Nothing was added: Open still finds exactly the first key.
	s, err := pkcs11.Open(context.Background(), pkcs11.Config{Module: tok.Module, Token: tok.Label, Label: "once", PIN: tok.PIN})
	if err != nil {
		t.Fatalf("Open after the refusals: %v", err)
	}
	defer s.Close()
	if got := common.Address(s.Address()); got != addr {
		t.Fatalf("%s, want %s", got.Hex(), addr.Hex())
	}
}

func TestGenerate_AWrongPINOrNoLabelIsAnErrorWithoutThePIN(t *testing.T) {
	tok := softhsmtest.New(t, tokenLabel)
	const wrongPIN = "987654"
	for name, cfg := range map[string]pkcs11.Config{
		"PIN was refused": {Module: tok.Module, Token: tok.Label, Label: "k", PIN: wrongPIN},
		"no key label":    {Module: tok.Module, Token: tok.Label, ID: []byte{1}, PIN: tok.PIN},
		"no PIN":          {Module: tok.Module, Token: tok.Label, Label: "k"},
	} {
		_, err := pkcs11.Generate(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), wrongPIN) || strings.Contains(err.Error(), tok.PIN) {
			t.Errorf("%s: the error shows a PIN: %v", name, err)
		}
	}
}
