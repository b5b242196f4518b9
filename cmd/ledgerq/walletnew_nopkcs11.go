//go:build !cgo

package main

import (
	"context"
	"errors"

	"github.com/ethereum/go-ethereum/common"
)

// errNoCgo is `wallet new --backend pkcs11`'s answer in a build without
// cgo: PKCS#11 modules are C libraries (internal/signers/pkcs11).
var errNoCgo = errors.New("this ledgerq was built without cgo (CGO_ENABLED=0); PKCS#11 needs a cgo build: CGO_ENABLED=1 go build ./cmd/ledgerq")

func pkcs11Available() error { return errNoCgo }

func generatePKCS11Key(context.Context, pkcs11Request) (common.Address, []byte, error) {
	return common.Address{}, nil, errNoCgo
}
