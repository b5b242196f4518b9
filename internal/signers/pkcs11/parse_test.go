//go:build cgo

package pkcs11

import (
	"crypto/ecdsa"
	"encoding/asn1"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

// SoftHSM2 answers the DER-wrapped point and a bare r||s; other modules
// answer the bare point or a DER signature, which these read alike.

func TestParseECPoint_ReadsTheDERWrappedAndTheBarePoint(t *testing.T) {
	t.Parallel()
	// A bare point is 04 || X || Y: when X starts with 3f it reads as a
	// whole DER OCTET STRING of 63 bytes, and must still be read as bare.
	var keys []*ecdsa.PrivateKey
	for len(keys) < 2 || crypto.FromECDSAPub(&keys[len(keys)-1].PublicKey)[1] != 0x3f {
		keys = append(keys, mustKey(t))
	}
	for i, key := range keys {
		bare := crypto.FromECDSAPub(&key.PublicKey)
		wrapped, err := asn1.Marshal(bare)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"bare": bare, "wrapped": wrapped} {
			pub, err := parseECPoint(b)
			if err != nil {
				t.Fatalf("%d %s: %v", i, name, err)
			}
			if crypto.PubkeyToAddress(*pub) != crypto.PubkeyToAddress(key.PublicKey) {
				t.Fatalf("%d %s: another key", i, name)
			}
		}
	}
	compressed := crypto.CompressPubkey(&mustKey(t).PublicKey)
	if _, err := parseECPoint(compressed); err == nil {
		t.Fatal("a compressed point was read")
	}
}

func TestParseSignature_ReadsRawAndDER(t *testing.T) {
	t.Parallel()
	r, s := big.NewInt(0x1234), new(big.Int).Lsh(big.NewInt(0xabcd), 200)
	raw := make([]byte, 64)
	r.FillBytes(raw[:32])
	s.FillBytes(raw[32:])
	der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	if err != nil {
		t.Fatal(err)
	}
	for name, sig := range map[string][]byte{"raw": raw, "DER": der} {
		gr, gs, err := parseSignature(sig)
		if err != nil || gr.Cmp(r) != 0 || gs.Cmp(s) != 0 {
			t.Fatalf("%s: r %v s %v, %v", name, gr, gs, err)
		}
	}
	if _, _, err := parseSignature(raw[:63]); err == nil {
		t.Fatal("a 63-byte signature was read")
	}
}

func TestCheckCurve_AcceptsOnlySecp256k1(t *testing.T) {
	t.Parallel()
	for oid, ok := range map[string]bool{"1.3.132.0.10": true, "1.2.840.10045.3.1.7": false, "1.3.132.0.34": false} {
		var id asn1.ObjectIdentifier
		for _, part := range splitOID(oid) {
			id = append(id, part)
		}
		der, err := asn1.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkCurve(der); (err == nil) != ok {
			t.Fatalf("%s: %v", oid, err)
		}
	}
	if err := checkCurve([]byte{0x13, 0x01, 'x'}); err == nil { // a PrintableString, not an OID
		t.Fatal("a curve by name was accepted")
	}
}

func splitOID(s string) []int {
	var out []int
	n := 0
	for _, c := range s + "." {
		if c == '.' {
			out = append(out, n)
			n = 0
			continue
		}
		n = n*10 + int(c-'0')
	}
	return out
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
