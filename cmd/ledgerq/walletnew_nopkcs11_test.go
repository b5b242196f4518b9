//go:build !cgo

package main

import (
	"strings"
	"testing"
)

// Without cgo there is no PKCS#11, and the answer says how to build with it
// before it asks for anything else.
func TestWalletNew_PKCS11WithoutCgoSaysHowToBuildWithIt(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "pkcs11"},
		{"--backend", "pkcs11", "--pkcs11-module", "/usr/lib/softhsm/libsofthsm2.so", "--pkcs11-token", "t", "--label", "k"},
	} {
		_, _, err := walletNew(t, map[string]string{pkcs11PINEnv: "pin"}, args...)
		if err == nil || !strings.Contains(err.Error(), "this ledgerq was built without cgo (CGO_ENABLED=0); PKCS#11 needs a cgo build: CGO_ENABLED=1 go build ./cmd/ledgerq") {
			t.Errorf("%q: %v", args, err)
		}
	}
}
