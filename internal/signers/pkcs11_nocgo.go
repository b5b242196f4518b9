//go:build !cgo

package signers

import (
	"context"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/keystore"
)

func (o *Opener) openPKCS11(context.Context, Decl) (keystore.Signer, error) {
	return nil, &RefusedError{fmt.Errorf("this ledgerq was built without cgo (CGO_ENABLED=0); the pkcs11 backend needs a cgo build: CGO_ENABLED=1 go build ./cmd/ledgerq")}
}
