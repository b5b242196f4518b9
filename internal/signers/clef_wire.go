package signers

import (
	"context"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/clef"
)

func (o *Opener) openClef(ctx context.Context, d Decl) (keystore.Signer, error) {
	if o.cfg.ClefURL == "" {
		return nil, &RefusedError{fmt.Errorf("wallet %s: no remote signer is configured for clef wallets (--wallet-clef-url)", d.Name)}
	}
	return clef.Open(ctx, clef.Config{URL: o.cfg.ClefURL, Address: d.Address, Timeout: o.cfg.ClefTimeout})
}
