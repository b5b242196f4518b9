//go:build cgo

package pkcs11_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	p11 "github.com/miekg/pkcs11"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11"
	"github.com/ledgerq/ledgerq/internal/signers/pkcs11/softhsmtest"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// The tests cannot run in parallel: SoftHSM2 reads SOFTHSM2_CONF, set per
// test, when the process initialises it (softhsmtest).

const (
	tokenLabel = "ledgerq"
	keyLabel   = "k1"
)

var keyID = []byte{0x01}

type bundle struct {
	tok    *softhsmtest.Token
	cfg    pkcs11.Config
	signer *pkcs11.Signer
}

// setup makes a token with a secp256k1 key made by pkcs11-tool and opens a
// signer on it, closed when t ends.
func setup(t testing.TB) bundle {
	t.Helper()
	tok := softhsmtest.New(t, tokenLabel)
	tok.NewKey(t, "secp256k1", keyLabel, keyID)
	cfg := pkcs11.Config{Module: tok.Module, Token: tok.Label, Label: keyLabel, ID: keyID, PIN: tok.PIN}
	s, err := pkcs11.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return bundle{tok: tok, cfg: cfg, signer: s}
}

func transfer(txType byte, chainID *big.Int, nonce uint64) *types.Transaction {
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	switch txType {
	case types.LegacyTxType:
		return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: big.NewInt(2e9), Gas: 21000, To: &to, Value: big.NewInt(1)})
	case types.AccessListTxType:
		return types.NewTx(&types.AccessListTx{ChainID: chainID, Nonce: nonce, GasPrice: big.NewInt(2e9), Gas: 21000, To: &to, Value: big.NewInt(1),
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}}})
	default:
		return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(3e9), Gas: 21000, To: &to, Value: big.NewInt(1)})
	}
}

func TestSigner_SignsLegacyAccessListAndDynamicFeeTxsThatRecoverToTheKeysAddressWithLowS(t *testing.T) {
	b := setup(t)
	addr := common.Address(b.signer.Address())
	halfN := new(big.Int).Rsh(crypto.S256().Params().N, 1)
	for _, chainID := range []int64{1, 1337, 31337} {
		for _, txType := range []byte{types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType} {
			// Several nonces, so that both halves of s come out of the
			// device and the low-s rule is exercised.
			for nonce := uint64(0); nonce < 8; nonce++ {
				name := fmt.Sprintf("chain %d type %d nonce %d", chainID, txType, nonce)
				cid := big.NewInt(chainID)
				signed, err := b.signer.SignTx(context.Background(), transfer(txType, cid, nonce), cid)
				if err != nil {
					t.Fatalf("%s: SignTx: %v", name, err)
				}
				from, err := types.Sender(types.LatestSignerForChainID(cid), signed)
				if err != nil {
					t.Fatalf("%s: Sender: %v", name, err)
				}
				if from != addr {
					t.Fatalf("%s: recovers to %s, want the key's %s", name, from.Hex(), addr.Hex())
				}
				if signed.Type() != txType || signed.ChainId().Int64() != chainID {
					t.Fatalf("%s: signed type %d chain %d", name, signed.Type(), signed.ChainId())
				}
				if _, _, s := signed.RawSignatureValues(); s.Cmp(halfN) > 0 {
					t.Fatalf("%s: s %x is high", name, s)
				}
			}
		}
	}
}

func TestSigner_TheKeyIsOneThatNeverLeavesTheToken(t *testing.T) {
	b := setup(t)
	checkNeverLeaves(t, b.tok, keyLabel)
	// And it signs for the address of the public key on the token.
	if _, err := b.signer.SignTx(context.Background(), transfer(types.DynamicFeeTxType, big.NewInt(1), 0), big.NewInt(1)); err != nil {
		t.Fatal(err)
	}
}

// checkNeverLeaves reads the private key labelled label back from the
// token: it must be sensitive and not extractable.
func checkNeverLeaves(t *testing.T, tok *softhsmtest.Token, label string) {
	t.Helper()
	attrs := privateKeyAttrs(t, tok, label, p11.CKA_EXTRACTABLE, p11.CKA_SENSITIVE)
	isTrue := func(v []byte) bool { return len(v) == 1 && v[0] == 1 }
	if isTrue(attrs[p11.CKA_EXTRACTABLE]) {
		t.Error("the private key is extractable")
	}
	if !isTrue(attrs[p11.CKA_SENSITIVE]) {
		t.Error("the private key is not sensitive")
	}
}

// privateKeyAttrs reads attributes of the one private key labelled label
// through a handle of the test's own on the module.
func privateKeyAttrs(t *testing.T, tok *softhsmtest.Token, label string, want ...uint) map[uint][]byte {
	t.Helper()
	ctx := p11.New(tok.Module)
	if ctx == nil {
		t.Fatal("loading the module")
	}
	defer ctx.Destroy()
	switch err := ctx.Initialize(); {
	case err == nil:
		// Nothing of the test's holds the module: leave it finalised, so
		// that the next test's initialisation reads its own SOFTHSM2_CONF.
		defer ctx.Finalize()
	case !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)):
		t.Fatal(err)
	}
	slot := findSlot(t, ctx, tok.Label)
	sess, err := ctx.OpenSession(slot, p11.CKF_SERIAL_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.CloseSession(sess)
	if err := ctx.Login(sess, p11.CKU_USER, tok.PIN); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		t.Fatal(err)
	}
	if err := ctx.FindObjectsInit(sess, []*p11.Attribute{p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY), p11.NewAttribute(p11.CKA_LABEL, label)}); err != nil {
		t.Fatal(err)
	}
	objs, _, err := ctx.FindObjects(sess, 2)
	_ = ctx.FindObjectsFinal(sess)
	if err != nil || len(objs) != 1 {
		t.Fatalf("private key %q: %d found, %v", label, len(objs), err)
	}
	var tmpl []*p11.Attribute
	for _, typ := range want {
		tmpl = append(tmpl, p11.NewAttribute(typ, nil))
	}
	attrs, err := ctx.GetAttributeValue(sess, objs[0], tmpl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint][]byte{}
	for _, a := range attrs {
		got[a.Type] = a.Value
	}
	return got
}

func findSlot(t testing.TB, ctx *p11.Ctx, label string) uint {
	t.Helper()
	slots, err := ctx.GetSlotList(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, slot := range slots {
		if info, err := ctx.GetTokenInfo(slot); err == nil && info.Label == label {
			return slot
		}
	}
	t.Fatalf("no token %q", label)
	return 0
}

func TestSigner_ARealGethMinesATransferSignedInTheHSM(t *testing.T) {
	n := testgeth.Start(t)
	b := setup(t)
	addr := common.Address(b.signer.Address())
	n.Fund(t, addr, big.NewInt(1e18))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ec := n.Client()
	head, err := ec.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tip := big.NewInt(1e9)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	to := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	chainID := big.NewInt(testgeth.DevChainID)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 0, GasTipCap: tip, GasFeeCap: feeCap, Gas: 21000, To: &to, Value: big.NewInt(12345)})
	signed, err := b.signer.SignTx(ctx, tx, chainID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ec.SendTransaction(ctx, signed); err != nil {
		t.Fatalf("geth refused the HSM's transaction: %v", err)
	}
	r := n.WaitMined(t, signed.Hash())
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("receipt status %d", r.Status)
	}
	got, err := ec.BalanceAt(ctx, to, nil)
	if err != nil || got.Int64() != 12345 {
		t.Fatalf("the recipient holds %v (%v), want 12345", got, err)
	}
}

func TestOpen_RefusesAConfiguredAddressThatIsNotTheKeysNamingBoth(t *testing.T) {
	b := setup(t)
	key := common.Address(b.signer.Address())
	other := common.HexToAddress("0x1111111111111111111111111111111111111111")
	cfg := b.cfg
	cfg.Address = other
	s, err := pkcs11.Open(context.Background(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a key of another address")
	}
	for _, want := range []string{key.Hex(), other.Hex()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	// The right address is accepted.
	cfg.Address = key
	s, err = pkcs11.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open with the key's own address: %v", err)
	}
	s.Close()
}

func TestOpen_AWrongPINAMissingKeyOrAnotherCurveIsAClearErrorWithoutThePIN(t *testing.T) {
	b := setup(t)
	b.tok.NewKey(t, "prime256v1", "p256", []byte{0x02})
	// The signer that opened shows where its key is, never its PIN.
	for _, text := range []string{b.signer.String(), fmt.Sprintf("%v %+v %#v", b.signer, b.signer, b.signer), fmt.Sprintf("%v %+v %#v", b.cfg, b.cfg, b.cfg)} {
		if strings.Contains(text, b.tok.PIN) {
			t.Errorf("%q shows the PIN", text)
		}
	}
	if s := b.signer.String(); !strings.Contains(s, tokenLabel) || !strings.Contains(s, keyLabel) || !strings.Contains(s, common.Address(b.signer.Address()).Hex()) {
		t.Errorf("String %q does not show the token, the key and the address", s)
	}
	if got := keystore.BackendOf(b.signer); got != "pkcs11" {
		t.Errorf("its signatures are counted as backend %q, not pkcs11", got)
	}
	// A token's login is the process's: with the signer open, a wrong
	// PIN would meet CKR_USER_ALREADY_LOGGED_IN, which checks no PIN.
	b.signer.Close()
	const wrongPIN = "987654"
	cases := []struct {
		name string
		edit func(*pkcs11.Config)
		want []string
	}{
		{"wrong PIN", func(c *pkcs11.Config) { c.PIN = wrongPIN }, []string{"CKR_PIN_INCORRECT", "PIN was refused", tokenLabel}},
		{"missing label", func(c *pkcs11.Config) { c.Label, c.ID = "nope", nil }, []string{`no private EC key "nope"`, tokenLabel}},
		{"missing id", func(c *pkcs11.Config) { c.Label, c.ID = "", []byte{0x09} }, []string{"no private EC key id 09"}},
		{"P-256 key", func(c *pkcs11.Config) { c.Label, c.ID = "p256", []byte{0x02} }, []string{"1.2.840.10045.3.1.7 (P-256)", "not secp256k1"}},
		{"missing token", func(c *pkcs11.Config) { c.Token = "absent" }, []string{`no token labelled "absent"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := b.cfg
			tc.edit(&cfg)
			s, err := pkcs11.Open(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q", want)
				}
			}
			for _, pin := range []string{b.tok.PIN, wrongPIN} {
				if strings.Contains(err.Error(), pin) {
					t.Errorf("the error shows a PIN")
				}
			}
			var un *keystore.UnavailableError
			if tc.name != "missing token" && errors.As(err, &un) {
				t.Errorf("a configuration error is an UnavailableError: %v", err)
			}
		})
	}
}

func TestOpen_AModuleThatDoesNotLoadIsUnavailable(t *testing.T) {
	for _, module := range []string{"/nonexistent/libnone.so", "/etc/hostname"} {
		_, err := pkcs11.Open(context.Background(), pkcs11.Config{Module: module, Token: "t", Label: "k", PIN: "secret-pin"})
		var un *keystore.UnavailableError
		if !errors.As(err, &un) || un.Backend != pkcs11.Backend {
			t.Fatalf("%s: %v, want an UnavailableError of %s", module, err, pkcs11.Backend)
		}
		if strings.Contains(err.Error(), "secret-pin") || !strings.Contains(err.Error(), module) {
			t.Fatalf("%s: %v", module, err)
		}
	}
}

func TestSigner_ASessionLostBehindItsBackIsUnavailableOnceThenSignsAgain(t *testing.T) {
	for _, how := range []string{"C_CloseAllSessions", "C_Finalize"} {
		t.Run(how, func(t *testing.T) {
			b := setup(t)
			cid := big.NewInt(1)
			sign := func() error {
				_, err := b.signer.SignTx(context.Background(), transfer(types.DynamicFeeTxType, cid, 0), cid)
				return err
			}
			if err := sign(); err != nil {
				t.Fatal(err)
			}
			// Another handle on the same module in this process, as
			// another library or an HSM's restart would.
			other := p11.New(b.tok.Module)
			if err := other.Initialize(); err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
				t.Fatal(err)
			}
			switch how {
			case "C_CloseAllSessions":
				if err := other.CloseAllSessions(findSlot(t, other, b.tok.Label)); err != nil {
					t.Fatal(err)
				}
			case "C_Finalize":
				if err := other.Finalize(); err != nil {
					t.Fatal(err)
				}
			}
			other.Destroy()

			err := sign()
			var un *keystore.UnavailableError
			if !errors.As(err, &un) || un.Backend != pkcs11.Backend {
				t.Fatalf("after %s: %v, want an UnavailableError", how, err)
			}
			t.Log(err)
			for i := range 3 {
				if err := sign(); err != nil {
					t.Fatalf("signing %d after the session was lost: %v", i, err)
				}
			}
		})
	}
}

func TestSigner_ADoneContextSignsNothing(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.signer.SignTx(ctx, transfer(types.LegacyTxType, big.NewInt(1), 0), big.NewInt(1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

// BenchmarkSigner_SignTx signs EIP-1559 transfers with SoftHSM2 and reports
// the latency's p50 and p99 besides ns/op (run with -benchtime=2000x for a
// p99 over enough signatures).
func BenchmarkSigner_SignTx(b *testing.B) {
	bd := setup(b)
	cid := big.NewInt(1)
	tx := transfer(types.DynamicFeeTxType, cid, 0)
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := bd.signer.SignTx(ctx, tx, cid); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	if len(took) > 0 {
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[(len(took)*99)/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(len(took)), "signatures")
	}
}
