//go:build cgo

package pkcs11

import (
	"context"
	"crypto/rand"
	"encoding/asn1"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	p11 "github.com/miekg/pkcs11"
)

// IDSize is the length of the CKA_ID that Generate gives a key when the
// configuration names none.
const IDSize = 16

// NewID returns a random CKA_ID of IDSize bytes.
func NewID() ([]byte, error) {
	id := make([]byte, IDSize)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("pkcs11: making a key id: %w", err)
	}
	return id, nil
}

// Generate makes a secp256k1 key pair on cfg's token with
// C_GenerateKeyPair (CKM_EC_KEY_PAIR_GEN): a private key that lives on the
// token, needs the login, is sensitive, never extractable and signs, and
// its public key; both carry cfg.Label and cfg.ID (NewID's when cfg.ID is
// empty), so that Open finds the pair by either. It returns the key's
// address, derived by Open as every signer of the key will derive it.
// cfg.Label is required and cfg.Address is not read.
//
// Generate refuses a label that an object on the token has already, or an
// id that one has: Open would then find two keys, or the wrong one. Two
// Generates of the same label racing on one token may both pass the check;
// this is an operator's command, run once per key.
func Generate(ctx context.Context, cfg Config) (common.Address, error) {
	if cfg.Label == "" {
		return common.Address{}, errors.New("pkcs11: no key label (a new key needs one)")
	}
	if len(cfg.ID) == 0 {
		id, err := NewID()
		if err != nil {
			return common.Address{}, err
		}
		cfg.ID = id
	}
	cfg.Address = common.Address{}
	if err := cfg.Validate(); err != nil {
		return common.Address{}, err
	}
	if err := ctx.Err(); err != nil {
		return common.Address{}, err
	}
	mod, err := acquireModule(cfg.Module)
	if err != nil {
		return common.Address{}, err
	}
	// A Signer without a key: its Close closes the session and releases
	// the module.
	g := &Signer{cfg: cfg, mod: mod, sem: make(chan struct{}, 1)}
	defer g.Close()
	sess, err := g.login(p11.CKF_SERIAL_SESSION | p11.CKF_RW_SESSION)
	if err != nil {
		return common.Address{}, err
	}
	g.sess, g.live = sess, true
	if err := g.refuseTaken(); err != nil {
		return common.Address{}, err
	}
	if err := g.generate(); err != nil {
		return common.Address{}, err
	}
	// Open while g still holds the module, so that it stays initialised
	// and logged in.
	s, err := Open(ctx, cfg)
	if err != nil {
		return common.Address{}, fmt.Errorf("the key was made, but opening it failed: %w", err)
	}
	defer s.Close()
	return s.addr, nil
}

// refuseTaken fails when an object on the token has the key's label or id.
func (g *Signer) refuseTaken() error {
	for _, a := range []*p11.Attribute{
		p11.NewAttribute(p11.CKA_LABEL, g.cfg.Label),
		p11.NewAttribute(p11.CKA_ID, g.cfg.ID),
	} {
		n, err := g.count(a)
		if err != nil {
			return err
		}
		if n > 0 {
			what := fmt.Sprintf("label %q", g.cfg.Label)
			if a.Type == p11.CKA_ID {
				what = fmt.Sprintf("id %x", g.cfg.ID)
			}
			return fmt.Errorf("pkcs11: %s already has an object with the %s: refusing to make a second key that Open could not tell apart (choose another)", g.cfg.tokenText(), what)
		}
	}
	return nil
}

// count returns how many objects visible to the session match a (at most
// one is counted past the first, which is all refuseTaken needs).
func (g *Signer) count(a *p11.Attribute) (int, error) {
	c := g.mod.ctx
	what := "looking for objects on " + g.cfg.tokenText()
	if err := c.FindObjectsInit(g.sess, []*p11.Attribute{a}); err != nil {
		return 0, classify(what, err)
	}
	objs, _, err := c.FindObjects(g.sess, 2)
	if ferr := c.FindObjectsFinal(g.sess); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return 0, classify(what, err)
	}
	return len(objs), nil
}

// generate runs C_GenerateKeyPair for a secp256k1 pair on the token.
func (g *Signer) generate() error {
	params, err := asn1.Marshal(oidSecp256k1)
	if err != nil {
		return fmt.Errorf("pkcs11: encoding the secp256k1 OID: %w", err)
	}
	pub := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PUBLIC_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_EC),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, false),
		p11.NewAttribute(p11.CKA_VERIFY, true),
		p11.NewAttribute(p11.CKA_EC_PARAMS, params),
		p11.NewAttribute(p11.CKA_LABEL, g.cfg.Label),
		p11.NewAttribute(p11.CKA_ID, g.cfg.ID),
	}
	priv := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_EC),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, true),
		p11.NewAttribute(p11.CKA_SENSITIVE, true),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, false),
		p11.NewAttribute(p11.CKA_SIGN, true),
		p11.NewAttribute(p11.CKA_LABEL, g.cfg.Label),
		p11.NewAttribute(p11.CKA_ID, g.cfg.ID),
	}
	mech := []*p11.Mechanism{p11.NewMechanism(p11.CKM_EC_KEY_PAIR_GEN, nil)}
	if _, _, err := g.mod.ctx.GenerateKeyPair(g.sess, mech, pub, priv); err != nil {
		if errors.Is(err, p11.Error(p11.CKR_MECHANISM_INVALID)) || errors.Is(err, p11.Error(p11.CKR_CURVE_NOT_SUPPORTED)) || errors.Is(err, p11.Error(p11.CKR_DOMAIN_PARAMS_INVALID)) {
			return fmt.Errorf("pkcs11: %s cannot make secp256k1 keys: %w", g.cfg.tokenText(), err)
		}
		return classify("making a secp256k1 key pair on "+g.cfg.tokenText(), err)
	}
	return nil
}
