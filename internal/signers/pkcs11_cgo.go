//go:build cgo

package signers

import (
	"context"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
)

func (o *Opener) openPKCS11(ctx context.Context, d Decl) (keystore.Signer, error) {
	if o.cfg.PKCS11Module == "" {
		return nil, &RefusedError{errNoPKCS11(d)}
	}
	pin, err := o.pin()
	if err != nil {
		return nil, &RefusedError{err}
	}
	label, id, err := pkcs11Key(d.Key)
	if err != nil {
		return nil, &RefusedError{err}
	}
	return pkcs11.Open(ctx, pkcs11.Config{Module: o.cfg.PKCS11Module, Token: o.cfg.PKCS11Token, Label: label, ID: id, PIN: pin, Address: d.Address})
}
