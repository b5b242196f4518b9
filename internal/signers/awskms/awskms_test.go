package awskms_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/awskms"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

var _ keystore.Signer = (*awskms.Signer)(nil)

type bundle struct {
	srv    *localkmstest.Server
	keyID  string
	signer *awskms.Signer
}

// setup starts local-kms, makes a secp256k1 key through the KMS API and
// opens its signer.
func setup(t testing.TB) bundle {
	t.Helper()
	srv := localkmstest.Start(t)
	keyID := srv.CreateKey(t, kmstypes.KeySpecEccSecgP256k1)
	s, err := awskms.Open(ctxFor(t, 10*time.Second), configFor(srv, keyID))
	require.NoError(t, err)
	return bundle{srv: srv, keyID: keyID, signer: s}
}

func configFor(srv *localkmstest.Server, keyID string) awskms.Config {
	return awskms.Config{KeyID: keyID, Region: localkmstest.Region, Endpoint: srv.URL, Credentials: localkmstest.Credentials()}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// txOf makes an unsigned transaction of type typ for chainID.
func txOf(typ byte, chainID *big.Int, nonce uint64) *types.Transaction {
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	gasPrice := big.NewInt(2_000_000_000)
	switch typ {
	case types.LegacyTxType:
		return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: gasPrice, Gas: 21000, To: &to, Value: big.NewInt(1)})
	case types.AccessListTxType:
		return types.NewTx(&types.AccessListTx{ChainID: chainID, Nonce: nonce, GasPrice: gasPrice, Gas: 30000, To: &to, Value: big.NewInt(1),
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}}})
	default:
		return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(1_000_000_000), GasFeeCap: gasPrice, Gas: 21000, To: &to, Value: big.NewInt(1)})
	}
}

func TestSigner_SignsLegacyEIP2930AndEIP1559OnSeveralChainsRecoveringToTheKeysAddressWithLowS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	halfN := new(big.Int).Rsh(crypto.S256().Params().N, 1)
	want := common.Address(b.signer.Address())
	for _, chainID := range []int64{1, 1337, 31337} {
		for _, typ := range []byte{types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType} {
			id := big.NewInt(chainID)
			tx := txOf(typ, id, 7)
			signed, err := b.signer.SignTx(ctxFor(t, 10*time.Second), tx, id)
			require.NoError(t, err, "chain %d, type %d", chainID, typ)
			require.Equal(t, typ, signed.Type())
			require.Equal(t, id, signed.ChainId(), "chain %d, type %d", chainID, typ)
			from, err := types.Sender(types.LatestSignerForChainID(id), signed)
			require.NoError(t, err)
			require.Equal(t, want, from, "chain %d, type %d: the signature recovers to another address", chainID, typ)
			_, r, s := signed.RawSignatureValues()
			require.LessOrEqual(t, s.Cmp(halfN), 0, "chain %d, type %d: s is high", chainID, typ)

			// The address is the KMS key's: KMS itself verifies the
			// signature of the digest with that key.
			der, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
			require.NoError(t, err)
			digest := types.LatestSignerForChainID(id).Hash(tx)
			v, err := b.srv.Client().Verify(ctxFor(t, 10*time.Second), &kms.VerifyInput{
				KeyId: aws.String(b.keyID), Message: digest[:], MessageType: kmstypes.MessageTypeDigest,
				Signature: der, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256,
			})
			require.NoError(t, err)
			require.True(t, v.SignatureValid, "chain %d, type %d: KMS says its key did not make this signature", chainID, typ)
		}
	}
}

func TestSigner_ATransferItSignsIsMinedByGeth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	node := testgeth.Start(t)
	from := common.Address(b.signer.Address())
	node.Fund(t, from, big.NewInt(1e18))

	ctx := ctxFor(t, 30*time.Second)
	ec := node.Client()
	nonce, err := ec.PendingNonceAt(ctx, from)
	require.NoError(t, err)
	head, err := ec.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	to := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1_000_000_000))
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: node.ChainID, Nonce: nonce, GasTipCap: big.NewInt(1_000_000_000), GasFeeCap: feeCap, Gas: 21000, To: &to, Value: big.NewInt(12345)})
	signed, err := b.signer.SignTx(ctx, tx, node.ChainID)
	require.NoError(t, err)
	require.NoError(t, ec.SendTransaction(ctx, signed))
	r := node.WaitMined(t, signed.Hash())
	require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	got, err := ec.BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(12345), got)
}

func TestOpen_RefusesAConfiguredAddressThatIsNotTheKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := common.HexToAddress("0x1111111111111111111111111111111111111111")
	cfg := configFor(b.srv, b.keyID)
	cfg.Address = other
	_, err := awskms.Open(ctxFor(t, 10*time.Second), cfg)
	require.Error(t, err)
	require.Contains(t, err.Error(), other.Hex())
	require.Contains(t, err.Error(), common.Address(b.signer.Address()).Hex())

	cfg.Address = common.Address(b.signer.Address())
	s, err := awskms.Open(ctxFor(t, 10*time.Second), cfg)
	require.NoError(t, err, "the key's own address")
	require.Equal(t, b.signer.Address(), s.Address())
}

func TestOpen_RefusesAKeyThatIsNotSecp256k1(t *testing.T) {
	t.Parallel()
	srv := localkmstest.Start(t)
	keyID := srv.CreateKey(t, kmstypes.KeySpecEccNistP256)
	_, err := awskms.Open(ctxFor(t, 10*time.Second), configFor(srv, keyID))
	require.Error(t, err)
	require.Contains(t, err.Error(), "ECC_NIST_P256")
	require.Contains(t, err.Error(), "ECC_SECG_P256K1")
	require.Contains(t, err.Error(), keyID)
}

func TestParsePublicKey_RefusesAnotherCurve(t *testing.T) {
	t.Parallel()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	_, err = awskms.ParsePublicKey(der)
	require.ErrorContains(t, err, "not secp256k1")

	sk, err := crypto.GenerateKey()
	require.NoError(t, err)
	pub, err := awskms.ParsePublicKey(secp256k1SPKI(t, &sk.PublicKey))
	require.NoError(t, err)
	require.Equal(t, crypto.PubkeyToAddress(sk.PublicKey), crypto.PubkeyToAddress(*pub))
}

func TestSigner_AnswersUnavailableWithinTheDeadlineWhileKMSIsDownAndSignsAgainAfterItsRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := big.NewInt(1337)
	b.srv.Kill()

	const deadline = 3 * time.Second
	began := time.Now()
	_, err := b.signer.SignTx(ctxFor(t, deadline), txOf(types.DynamicFeeTxType, id, 0), id)
	took := time.Since(began)
	un, ok := errors.AsType[*keystore.UnavailableError](err)
	require.True(t, ok, "want *keystore.UnavailableError, got %v", err)
	require.Equal(t, awskms.Backend, un.Backend)
	require.Less(t, took, deadline+time.Second, "SignTx outlived its deadline")

	b.srv.Restart(t)
	signed, err := b.signer.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, id, 0), id)
	require.NoError(t, err)
	from, err := types.Sender(types.LatestSignerForChainID(id), signed)
	require.NoError(t, err)
	require.Equal(t, common.Address(b.signer.Address()), from)
}

// fakeKMS answers GetPublicKey with pub's key, and every Sign with status,
// header and a KMS error body of code (no KMS behind it).
func fakeKMS(t *testing.T, pub *ecdsa.PublicKey, status int, code string, header http.Header) *httptest.Server {
	t.Helper()
	spki := secp256k1SPKI(t, pub)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch r.Header.Get("X-Amz-Target") {
		case "TrentService.GetPublicKey":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"KeyId":             "arn:aws:kms:eu-west-2:111122223333:key/fake",
				"KeySpec":           "ECC_SECG_P256K1",
				"KeyUsage":          "SIGN_VERIFY",
				"PublicKey":         base64.StdEncoding.EncodeToString(spki),
				"SigningAlgorithms": []string{"ECDSA_SHA_256"},
			})
		default:
			for k, vs := range header {
				w.Header()[k] = vs
			}
			if code != "" {
				w.Header().Set("X-Amzn-Errortype", code)
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": "from the fake"})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func secp256k1SPKI(t testing.TB, pub *ecdsa.PublicKey) []byte {
	t.Helper()
	type alg struct{ Algorithm, Parameters asn1.ObjectIdentifier }
	point := crypto.FromECDSAPub(pub)
	der, err := asn1.Marshal(struct {
		Algorithm alg
		PublicKey asn1.BitString
	}{alg{asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}, asn1.ObjectIdentifier{1, 3, 132, 0, 10}}, asn1.BitString{Bytes: point, BitLength: len(point) * 8}})
	require.NoError(t, err)
	return der
}

func TestSigner_ThrottlingAndServerFaultsAreUnavailableAndRefusalsAreNot(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	for _, c := range []struct {
		name        string
		status      int
		code        string
		header      http.Header
		unavailable bool
		retryAfter  time.Duration
	}{
		{"throttled", 400, "ThrottlingException", nil, true, awskms.ThrottleRetryAfter},
		{"throttled with Retry-After", 400, "ThrottlingException", http.Header{"Retry-After": {"7"}}, true, 7 * time.Second},
		{"429", 429, "", nil, true, awskms.ThrottleRetryAfter},
		{"internal", 500, "KMSInternalException", nil, true, 0},
		{"503", 503, "", nil, true, 0},
		{"dependency timeout", 500, "DependencyTimeoutException", nil, true, 0},
		{"disabled", 400, "DisabledException", nil, true, awskms.KeyStateRetryAfter},
		{"invalid state", 400, "KMSInvalidStateException", nil, true, awskms.KeyStateRetryAfter},
		{"access denied", 400, "AccessDeniedException", nil, false, 0},
		{"not found", 400, "NotFoundException", nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeKMS(t, &key.PublicKey, c.status, c.code, c.header)
			s, err := awskms.Open(ctxFor(t, 10*time.Second), awskms.Config{KeyID: "alias/fake", Region: "eu-west-2", Endpoint: srv.URL, Credentials: localkmstest.Credentials()})
			require.NoError(t, err)
			require.Equal(t, crypto.PubkeyToAddress(key.PublicKey), common.Address(s.Address()))
			id := big.NewInt(1)
			_, err = s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, id, 0), id)
			require.Error(t, err)
			un, ok := errors.AsType[*keystore.UnavailableError](err)
			require.Equal(t, c.unavailable, ok, "unavailable? %v", err)
			if ok {
				require.Equal(t, awskms.Backend, un.Backend)
				require.Equal(t, c.retryAfter, un.RetryAfter)
			}
		})
	}
}

func TestSigner_AKMSThatNeverAnswersIsUnavailableAtTheDeadline(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	spki := secp256k1SPKI(t, &key.PublicKey)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "TrentService.GetPublicKey" {
			// Sign hangs until the client gives up (the body read first,
			// or the server would not see the connection close).
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": "fake", "KeySpec": "ECC_SECG_P256K1", "KeyUsage": "SIGN_VERIFY", "PublicKey": base64.StdEncoding.EncodeToString(spki)})
	}))
	t.Cleanup(srv.Close)
	s, err := awskms.Open(ctxFor(t, 10*time.Second), awskms.Config{KeyID: "fake", Region: "eu-west-2", Endpoint: srv.URL, Credentials: localkmstest.Credentials()})
	require.NoError(t, err)

	const deadline = 500 * time.Millisecond
	id := big.NewInt(1)
	began := time.Now()
	_, err = s.SignTx(ctxFor(t, deadline), txOf(types.DynamicFeeTxType, id, 0), id)
	took := time.Since(began)
	_, ok := errors.AsType[*keystore.UnavailableError](err)
	require.True(t, ok, "want *keystore.UnavailableError, got %v", err)
	require.GreaterOrEqual(t, took, deadline)
	require.Less(t, took, deadline+time.Second, "SignTx outlived its deadline")
}

func TestSigner_StringShowsTheKeyIDAndTheAddressOnlyAndItsBackendIsAWSKMS(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	srv := fakeKMS(t, &key.PublicKey, 500, "", nil)
	creds := localkmstest.Credentials()
	s, err := awskms.Open(ctxFor(t, 10*time.Second), awskms.Config{KeyID: "alias/fake", Region: "eu-west-2", Endpoint: srv.URL, Credentials: creds})
	require.NoError(t, err)
	require.Equal(t, "awskms(alias/fake, "+crypto.PubkeyToAddress(key.PublicKey).Hex()+")", s.String())
	require.Equal(t, awskms.Backend, keystore.BackendOf(s))
	c, err := creds.Retrieve(context.Background())
	require.NoError(t, err)
	require.NotContains(t, s.String(), c.SecretAccessKey)
}

// BenchmarkSigner_SignTx signs EIP-1559 transactions with a local-kms key,
// one at a time, and reports each signature's latency: run it with
// -benchtime=1000x (or more) for p50 and p99 over at least 1000.
func BenchmarkSigner_SignTx(b *testing.B) {
	bn := setup(b)
	id := big.NewInt(1337)
	took := make([]time.Duration, 0, b.N)
	ctx := ctxFor(b, time.Hour)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tx := txOf(types.DynamicFeeTxType, id, uint64(i))
		began := time.Now()
		if _, err := bn.signer.SignTx(ctx, tx, id); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(began))
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(took)), "signatures")
}
