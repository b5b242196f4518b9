package signers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/awskms"
)

// RefusedError says a backend answered and will not sign for the
// declaration: no such key, a key of another address or curve, a wrong PIN
// or passphrase, a backend that is not configured. Waiting does not mend
// it; a *keystore.UnavailableError (the backend could not be reached) may.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the backend's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// Opener opens the signer a declaration names, with the backends of its
// Config and the keystore passphrases of the configuration.
type Opener struct {
	cfg         Config
	passphrases keystore.PassphraseFiles
	logger      *slog.Logger
}

// NewOpener returns an Opener of cfg's backends; passphrases are
// --wallet-passphrase-file's, for keystore wallets. A nil logger discards.
func NewOpener(cfg Config, passphrases keystore.PassphraseFiles, logger *slog.Logger) *Opener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	return &Opener{cfg: cfg, passphrases: passphrases, logger: logger}
}

// Open opens d's signer and checks its address against d.Address when d
// names one. An error is a *keystore.UnavailableError when the backend
// could not be reached, else a *RefusedError; neither holds a secret.
func (o *Opener) Open(ctx context.Context, d Decl) (keystore.Signer, error) {
	if err := d.Validate(); err != nil {
		return nil, &RefusedError{err}
	}
	var (
		s   keystore.Signer
		err error
	)
	switch d.Backend {
	case Keystore:
		s, err = o.openKeystore(d)
	case PKCS11:
		s, err = o.openPKCS11(ctx, d)
	case AWSKMS:
		s, err = o.openKMS(ctx, d)
	case Clef:
		s, err = o.openClef(ctx, d)
	}
	if err != nil {
		var un *keystore.UnavailableError
		if errors.As(err, &un) {
			return nil, fmt.Errorf("wallet %s: %w", d.Name, err)
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, err
		}
		return nil, &RefusedError{fmt.Errorf("wallet %s: %w", d.Name, err)}
	}
	if d.Address != (common.Address{}) && common.Address(s.Address()) != d.Address {
		closeSigner(s)
		return nil, &RefusedError{fmt.Errorf("wallet %s: its %s key is the key of %s, not of the declared address %s: refusing it",
			d.Name, d.Backend, common.Address(s.Address()).Hex(), d.Address.Hex())}
	}
	o.logger.Info("wallet: signer opened", "wallet", d.Name, "backend", d.Backend, "key", d.Key, "address", common.Address(s.Address()).Hex())
	return s, nil
}

func (o *Opener) openKeystore(d Decl) (keystore.Signer, error) {
	path := d.Key
	if d.Declared {
		if o.cfg.KeystoreDir == "" {
			return nil, &RefusedError{fmt.Errorf("wallet %s: no --wallet-keystore-dir is configured for keystore wallets added at run time", d.Name)}
		}
		path = filepath.Join(o.cfg.KeystoreDir, d.Key)
	}
	pass, from, err := keystore.PassphraseFor(d.Name, o.passphrases, o.cfg.LookupEnv)
	if err != nil {
		return nil, err
	}
	s, err := keystore.OpenKeystore(path, pass)
	if errors.Is(err, keystore.ErrWrongPassphrase) {
		return nil, fmt.Errorf("%w (passphrase read from %s)", err, from)
	}
	return s, err
}

func (o *Opener) openKMS(ctx context.Context, d Decl) (keystore.Signer, error) {
	return awskms.Open(ctx, awskms.Config{KeyID: d.Key, Region: o.cfg.KMSRegion, Endpoint: o.cfg.KMSEndpoint, Address: d.Address})
}

// pin reads the PKCS#11 user PIN: the first line of the PIN file, else
// the environment.
func (o *Opener) pin() (string, error) {
	if o.cfg.PKCS11PINFile != "" {
		pin, err := keystore.ReadPassphraseFile(o.cfg.PKCS11PINFile)
		if err != nil {
			return "", fmt.Errorf("the PKCS#11 PIN: %w", err)
		}
		return pin, nil
	}
	if v, ok := o.cfg.LookupEnv(PINEnv); ok && v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no PKCS#11 PIN: give --wallet-pkcs11-pin-file or set %s", PINEnv)
}

// pkcs11Key reads a pkcs11 key reference: id:HEX names the key's CKA_ID,
// anything else its CKA_LABEL.
func pkcs11Key(ref string) (label string, id []byte, err error) {
	if h, ok := strings.CutPrefix(ref, "id:"); ok {
		id, err := hex.DecodeString(strings.TrimPrefix(h, "0x"))
		if err != nil || len(id) == 0 {
			return "", nil, fmt.Errorf("key %q: id:HEX wants hexadecimal digits", ref)
		}
		return "", id, nil
	}
	return ref, nil, nil
}

// closeSigner releases what a signer holds (a PKCS#11 session), when it
// holds anything.
func closeSigner(s keystore.Signer) {
	if c, ok := s.(interface{ Close() }); ok {
		c.Close()
	}
}
