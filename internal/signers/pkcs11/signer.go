//go:build cgo

package pkcs11

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	p11 "github.com/miekg/pkcs11"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Backend is the name of this backend in a *keystore.UnavailableError.
const Backend = "pkcs11"

// Config says where the key is. The PIN is the caller's to read (from a
// file or the environment); String and GoString never show it.
type Config struct {
	// Module is the path of the vendor's PKCS#11 library (.so).
	Module string
	// Token is the token's label; Slot, when set, names the slot instead
	// (and Token, if also set, must be its token's label).
	Token string
	Slot  *uint
	// Label and ID are the key's CKA_LABEL and CKA_ID; at least one is set,
	// and both must match when both are.
	Label string
	ID    []byte
	// PIN is the user PIN of the token.
	PIN string
	// Address, when set, is the address the key must have: Open refuses a
	// key of another one.
	Address common.Address
}

// Validate checks that c names a module, a token and a key, and has a PIN.
func (c Config) Validate() error {
	switch {
	case c.Module == "":
		return errors.New("pkcs11: no module (the path of the PKCS#11 library)")
	case c.Token == "" && c.Slot == nil:
		return errors.New("pkcs11: no token label and no slot")
	case c.Label == "" && len(c.ID) == 0:
		return errors.New("pkcs11: no key label and no key id")
	case c.PIN == "":
		return errors.New("pkcs11: no PIN")
	}
	return nil
}

// String shows where the key is, never the PIN.
func (c Config) String() string {
	return fmt.Sprintf("pkcs11.Config(module %s, %s, %s, PIN redacted)", c.Module, c.tokenText(), c.keyText())
}

// GoString is String, so that %#v shows no PIN either.
func (c Config) GoString() string { return c.String() }

func (c Config) tokenText() string {
	switch {
	case c.Slot != nil && c.Token != "":
		return fmt.Sprintf("token %q in slot %d", c.Token, *c.Slot)
	case c.Slot != nil:
		return "slot " + strconv.FormatUint(uint64(*c.Slot), 10)
	}
	return fmt.Sprintf("token %q", c.Token)
}

func (c Config) keyText() string {
	switch {
	case c.Label != "" && len(c.ID) > 0:
		return fmt.Sprintf("key %q (id %s)", c.Label, hex.EncodeToString(c.ID))
	case c.Label != "":
		return fmt.Sprintf("key %q", c.Label)
	}
	return "key id " + hex.EncodeToString(c.ID)
}

// Signer signs with a secp256k1 key held by a PKCS#11 token.
type Signer struct {
	cfg  Config
	mod  *module
	addr common.Address

	// sem holds the one session: a call owns it while it holds the slot.
	sem chan struct{}
	// Owned by the holder of sem:
	sess   p11.SessionHandle
	key    p11.ObjectHandle
	live   bool // sess and key are usable
	closed bool
}

var _ keystore.Signer = (*Signer)(nil)

// Open loads cfg.Module (once per process), finds the token, opens a
// session, logs in as the user, finds the private key (CKO_PRIVATE_KEY,
// CKK_EC) and its public key (CKO_PUBLIC_KEY, same label and id), checks
// that the curve is secp256k1, and derives the key's address; it refuses
// a key whose address is not cfg.Address, when that is set. Close releases
// the session and the module.
//
// PKCS#11 logs the process in to a token, not a session: while another
// signer of this process holds a session on the token, C_Login answers
// CKR_USER_ALREADY_LOGGED_IN without checking the PIN, so a wrong PIN is
// found only by a signer that logs in first.
func Open(ctx context.Context, cfg Config) (*Signer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mod, err := acquireModule(cfg.Module)
	if err != nil {
		return nil, err
	}
	s := &Signer{cfg: cfg, mod: mod, sem: make(chan struct{}, 1)}
	if err := s.connect(); err != nil {
		s.Close()
		return nil, err
	}
	pub, err := s.publicKey()
	if err != nil {
		s.Close()
		return nil, err
	}
	s.addr = crypto.PubkeyToAddress(*pub)
	if cfg.Address != (common.Address{}) && cfg.Address != s.addr {
		s.Close()
		return nil, fmt.Errorf("pkcs11: %s on %s has address %s, not the configured %s: refusing to sign with it", cfg.keyText(), cfg.tokenText(), s.addr.Hex(), cfg.Address.Hex())
	}
	return s, nil
}

// Address implements keystore.Signer.
func (s *Signer) Address() ledger.Address { return ledger.Address(s.addr) }

// Backend names the backend for the wallet lane's signature metrics
// (keystore.BackendOf).
func (s *Signer) Backend() string { return Backend }

// String shows the token, the key's label (or id) and the address.
func (s *Signer) String() string {
	return fmt.Sprintf("pkcs11.Signer(%s, %s, %s)", s.cfg.tokenText(), s.cfg.keyText(), s.addr.Hex())
}

// GoString is String, so that %#v shows no PIN.
func (s *Signer) GoString() string { return s.String() }

// SignTx implements keystore.Signer: C_SignInit(CKM_ECDSA) and C_Sign on
// the transaction's signing hash, made recoverable and low-s by
// keystore.SignDigestTx. It waits for the signer's one session while ctx
// allows; the C_Sign call itself cannot be cancelled.
func (s *Signer) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	return keystore.SignDigestTx(ctx, tx, chainID, s.addr, s.signDigest)
}

func (s *Signer) signDigest(ctx context.Context, digest []byte) (r, sv *big.Int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if s.closed {
		return nil, nil, errors.New("pkcs11: the signer is closed")
	}
	if !s.live {
		if err := s.connect(); err != nil {
			return nil, nil, err
		}
	}
	sig, err := s.sign(digest)
	if err != nil {
		// Whatever went wrong, the next call starts from a new session:
		// a failed C_Sign ends the operation, a lost session is gone, and
		// a new login and key lookup cost a millisecond.
		s.drop()
		return nil, nil, classify("signing with "+s.cfg.keyText()+" on "+s.cfg.tokenText(), err)
	}
	return parseSignature(sig)
}

func (s *Signer) sign(digest []byte) ([]byte, error) {
	if err := s.mod.ctx.SignInit(s.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_ECDSA, nil)}, s.key); err != nil {
		return nil, err
	}
	return s.mod.ctx.Sign(s.sess, digest)
}

// Close closes the session and releases the module (finalised by the last
// signer to close). Safe to call twice.
func (s *Signer) Close() {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	if s.closed {
		return
	}
	s.closed = true
	// No C_Logout: the login belongs to the token for the whole process,
	// other signers' sessions included; it ends with the last session.
	s.drop()
	s.mod.release()
}

// drop closes the session, if any, and marks it for reopening.
func (s *Signer) drop() {
	if s.live {
		_ = s.mod.ctx.CloseSession(s.sess) // a session already gone is fine
	}
	s.live = false
}

// connect opens a session on the token, logs in and finds the private key.
func (s *Signer) connect() error {
	sess, err := s.login(p11.CKF_SERIAL_SESSION)
	if err != nil {
		return err
	}
	key, err := s.findOne(sess, p11.CKO_PRIVATE_KEY)
	if err != nil {
		_ = s.mod.ctx.CloseSession(sess)
		return err
	}
	s.sess, s.key, s.live = sess, key, true
	return nil
}

// login opens a session with flags on the token and logs in as the user.
func (s *Signer) login(flags uint) (p11.SessionHandle, error) {
	slot, err := s.findSlot()
	if errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_NOT_INITIALIZED)) {
		// Finalised behind our back (another handle on the module in this
		// process): initialise it again.
		if err := s.mod.reinitialize(); err != nil {
			return 0, classify("initialising module "+s.cfg.Module+" again", err)
		}
		slot, err = s.findSlot()
	}
	if err != nil {
		return 0, err
	}
	sess, err := s.mod.ctx.OpenSession(slot, flags)
	if err != nil {
		return 0, classify("opening a session on "+s.cfg.tokenText(), err)
	}
	fail := func(err error) (p11.SessionHandle, error) {
		_ = s.mod.ctx.CloseSession(sess)
		return 0, err
	}
	// The login state is the token's for the whole process: another
	// signer on the same token may have logged in already.
	if err := s.mod.ctx.Login(sess, p11.CKU_USER, s.cfg.PIN); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		if errors.Is(err, p11.Error(p11.CKR_PIN_INCORRECT)) || errors.Is(err, p11.Error(p11.CKR_PIN_LOCKED)) || errors.Is(err, p11.Error(p11.CKR_PIN_EXPIRED)) {
			return fail(fmt.Errorf("pkcs11: logging in to %s: %w (the PIN was refused)", s.cfg.tokenText(), err))
		}
		return fail(classify("logging in to "+s.cfg.tokenText(), err))
	}
	return sess, nil
}

// findSlot returns the slot of the configured token.
func (s *Signer) findSlot() (uint, error) {
	c := s.mod.ctx
	if s.cfg.Slot != nil {
		info, err := c.GetTokenInfo(*s.cfg.Slot)
		if err != nil {
			return 0, classify("reading the token in slot "+strconv.FormatUint(uint64(*s.cfg.Slot), 10), err)
		}
		if s.cfg.Token != "" && info.Label != s.cfg.Token {
			return 0, fmt.Errorf("pkcs11: slot %d holds token %q, not %q", *s.cfg.Slot, info.Label, s.cfg.Token)
		}
		return *s.cfg.Slot, nil
	}
	slots, err := c.GetSlotList(true)
	if err != nil {
		return 0, classify("listing slots", err)
	}
	var found []uint
	for _, slot := range slots {
		info, err := c.GetTokenInfo(slot)
		if err != nil {
			continue // a token removed meanwhile is not the one we look for
		}
		if info.Label == s.cfg.Token {
			found = append(found, slot)
		}
	}
	switch len(found) {
	case 0:
		// Absent now; it may be inserted (or the HSM come back) later.
		return 0, unavailable(fmt.Errorf("no token labelled %q in module %s (%d slots with a token)", s.cfg.Token, s.cfg.Module, len(slots)))
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("pkcs11: %d tokens labelled %q in module %s: configure the slot", len(found), s.cfg.Token, s.cfg.Module)
}

// findOne finds the one EC key of class with the configured label and id.
func (s *Signer) findOne(sess p11.SessionHandle, class uint) (p11.ObjectHandle, error) {
	kind := map[uint]string{p11.CKO_PRIVATE_KEY: "private", p11.CKO_PUBLIC_KEY: "public"}[class]
	tmpl := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, class),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_EC),
	}
	if s.cfg.Label != "" {
		tmpl = append(tmpl, p11.NewAttribute(p11.CKA_LABEL, s.cfg.Label))
	}
	if len(s.cfg.ID) > 0 {
		tmpl = append(tmpl, p11.NewAttribute(p11.CKA_ID, s.cfg.ID))
	}
	c := s.mod.ctx
	what := fmt.Sprintf("finding the %s EC %s on %s", kind, s.cfg.keyText(), s.cfg.tokenText())
	if err := c.FindObjectsInit(sess, tmpl); err != nil {
		return 0, classify(what, err)
	}
	objs, _, err := c.FindObjects(sess, 2)
	if ferr := c.FindObjectsFinal(sess); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return 0, classify(what, err)
	}
	switch len(objs) {
	case 0:
		return 0, fmt.Errorf("pkcs11: no %s EC %s on %s", kind, s.cfg.keyText(), s.cfg.tokenText())
	case 1:
		return objs[0], nil
	}
	return 0, fmt.Errorf("pkcs11: several %s EC keys match %s on %s: configure both the label and the id", kind, s.cfg.keyText(), s.cfg.tokenText())
}

// publicKey reads the key's public half: its curve (CKA_EC_PARAMS) must be
// secp256k1, its point (CKA_EC_POINT) uncompressed.
func (s *Signer) publicKey() (*ecdsa.PublicKey, error) {
	obj, err := s.findOne(s.sess, p11.CKO_PUBLIC_KEY)
	if err != nil {
		return nil, err
	}
	attrs, err := s.mod.ctx.GetAttributeValue(s.sess, obj, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_EC_PARAMS, nil),
		p11.NewAttribute(p11.CKA_EC_POINT, nil),
	})
	if err != nil {
		return nil, classify("reading the public "+s.cfg.keyText(), err)
	}
	var params, point []byte
	for _, a := range attrs {
		switch a.Type {
		case p11.CKA_EC_PARAMS:
			params = a.Value
		case p11.CKA_EC_POINT:
			point = a.Value
		}
	}
	if err := checkCurve(params); err != nil {
		return nil, fmt.Errorf("pkcs11: %s on %s: %w", s.cfg.keyText(), s.cfg.tokenText(), err)
	}
	pub, err := parseECPoint(point)
	if err != nil {
		return nil, fmt.Errorf("pkcs11: %s on %s: %w", s.cfg.keyText(), s.cfg.tokenText(), err)
	}
	return pub, nil
}

var (
	oidSecp256k1 = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
	curveNames   = map[string]string{
		"1.2.840.10045.3.1.7": "P-256",
		"1.3.132.0.34":        "P-384",
		"1.3.132.0.35":        "P-521",
	}
)

// checkCurve reads CKA_EC_PARAMS (DER: the named curve's OID) and refuses
// any curve but secp256k1.
func checkCurve(params []byte) error {
	var oid asn1.ObjectIdentifier
	rest, err := asn1.Unmarshal(params, &oid)
	if err != nil || len(rest) > 0 {
		return fmt.Errorf("CKA_EC_PARAMS %x is not a named curve's OID; need secp256k1 (%s)", params, oidSecp256k1)
	}
	if !oid.Equal(oidSecp256k1) {
		name := curveNames[oid.String()]
		if name != "" {
			name = " (" + name + ")"
		}
		return fmt.Errorf("the key's curve is %s%s, not secp256k1 (%s)", oid, name, oidSecp256k1)
	}
	return nil
}

// parseECPoint reads CKA_EC_POINT: the 65-byte uncompressed point, which
// PKCS#11 says to wrap in a DER OCTET STRING and some modules give bare.
func parseECPoint(b []byte) (*ecdsa.PublicKey, error) {
	point := b
	// A bare point is 65 bytes starting with 04; wrapped it is 67, so the
	// length tells them apart (the OCTET STRING tag is 04 too).
	if len(b) != 65 {
		var inner []byte
		if rest, err := asn1.Unmarshal(b, &inner); err == nil && len(rest) == 0 {
			point = inner
		}
	}
	if len(point) != 65 || point[0] != 4 {
		return nil, fmt.Errorf("CKA_EC_POINT (%d bytes) is not an uncompressed secp256k1 point", len(b))
	}
	pub, err := crypto.UnmarshalPubkey(point)
	if err != nil {
		return nil, fmt.Errorf("CKA_EC_POINT: %w", err)
	}
	return pub, nil
}

// parseSignature reads C_Sign's answer for CKM_ECDSA: r || s, 32 bytes
// each, as PKCS#11 specifies; some modules answer DER instead.
func parseSignature(sig []byte) (r, s *big.Int, err error) {
	if len(sig) == 64 {
		return new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]), nil
	}
	if bytes.HasPrefix(sig, []byte{0x30}) {
		return keystore.ParseDERSignature(sig)
	}
	return nil, nil, fmt.Errorf("pkcs11: the module answered a %d-byte signature, neither r||s (64 bytes) nor DER", len(sig))
}

// unavailableCodes are the answers that say the device, not the request,
// is at fault: waiting (and a new session) may mend them.
var unavailableCodes = map[p11.Error]bool{
	p11.CKR_GENERAL_ERROR:            true,
	p11.CKR_DEVICE_ERROR:             true,
	p11.CKR_DEVICE_MEMORY:            true,
	p11.CKR_DEVICE_REMOVED:           true,
	p11.CKR_TOKEN_NOT_PRESENT:        true,
	p11.CKR_TOKEN_NOT_RECOGNIZED:     true,
	p11.CKR_SESSION_HANDLE_INVALID:   true,
	p11.CKR_SESSION_CLOSED:           true,
	p11.CKR_SESSION_COUNT:            true,
	p11.CKR_USER_NOT_LOGGED_IN:       true, // logged out by a session closed elsewhere
	p11.CKR_CRYPTOKI_NOT_INITIALIZED: true, // finalised elsewhere in the process
	p11.CKR_KEY_HANDLE_INVALID:       true, // the object handles of a lost session
	p11.CKR_OBJECT_HANDLE_INVALID:    true,
	p11.CKR_FUNCTION_CANCELED:        true,
}

// classify wraps a module's error with what was being done: an
// *keystore.UnavailableError for the device's faults, a plain error else.
func classify(what string, err error) error {
	var code p11.Error
	if errors.As(err, &code) && unavailableCodes[code] {
		return unavailable(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("pkcs11: %s: %w", what, err)
}

func unavailable(err error) error {
	return &keystore.UnavailableError{Backend: Backend, Err: err}
}
