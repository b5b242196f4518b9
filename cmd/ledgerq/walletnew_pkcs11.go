//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	p11 "github.com/miekg/pkcs11"

	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
)

// pkcs11Available: this build has cgo, so PKCS#11.
func pkcs11Available() error { return nil }

// generatePKCS11Key generates r's key on its token and returns its address
// and id (a random one when r names none).
func generatePKCS11Key(ctx context.Context, r pkcs11Request) (common.Address, []byte, error) {
	id := r.id
	if len(id) == 0 {
		var err error
		if id, err = pkcs11.NewID(); err != nil {
			return common.Address{}, nil, err
		}
	}
	addr, err := pkcs11.Generate(ctx, pkcs11.Config{Module: r.module, Token: r.token, Slot: r.slot, Label: r.label, ID: id, PIN: r.pin})
	for _, code := range []uint{p11.CKR_PIN_INCORRECT, p11.CKR_PIN_LOCKED, p11.CKR_PIN_EXPIRED, p11.CKR_PIN_INVALID, p11.CKR_PIN_LEN_RANGE} {
		if errors.Is(err, p11.Error(code)) {
			return common.Address{}, nil, fmt.Errorf("%w; the PIN came from %s", err, r.pinFrom)
		}
	}
	if err != nil {
		return common.Address{}, nil, err
	}
	return addr, id, nil
}
