// Package awskms is a keystore.Signer whose secp256k1 key stays in AWS KMS,
// or in any server that speaks KMS's API (local-kms in the tests): an
// ECC_SECG_P256K1 key with the usage SIGN_VERIFY signs the transaction's
// signing hash (Sign, MessageType DIGEST, ECDSA_SHA_256), and
// keystore.SignDigestTx turns KMS's DER (r, s) into Ethereum's low-s,
// recoverable signature.
//
// The AWS SDK for Go v2 makes the calls and finds the credentials (its
// default chain: the environment, the shared files, a role from IMDS); they
// are never logged or shown. Go's crypto/x509 does not know the secp256k1
// curve (OID 1.3.132.0.10), so the public key KMS answers, a DER
// SubjectPublicKeyInfo, is read here with encoding/asn1: a dozen lines
// against pulling in a second x509 for one OID.
//
// Create makes a wallet's key (CreateKey, and CreateAlias when an alias is
// asked for) and derives its address with Open.
//
// The address is derived from that public key when the signer opens, and a
// configured address that differs refuses the wallet. Signing then names
// the key by the ARN GetPublicKey answered, not by the configured alias: an
// alias moved to another key later cannot make ledgerq sign with a key it
// did not check (and SignDigestTx would refuse its signature anyway).
//
// What a failed Sign means for the wallet lane (which retries; the SDK's
// own retries are off so that one call fits the caller's deadline):
//
//   - throttling (ThrottlingException, HTTP 429): *keystore.UnavailableError
//     with the server's Retry-After, else 1 s;
//   - the service unreachable or failing (network errors, timeouts, the
//     context's deadline, HTTP 5xx, KMSInternalException,
//     DependencyTimeoutException, KeyUnavailableException):
//     *keystore.UnavailableError;
//   - the key unusable for now but not gone (DisabledException,
//     KMSInvalidStateException: pending deletion, pending import, being
//     created or updated, its custom key store disconnected):
//     *keystore.UnavailableError after 30 s. Each of these is undone at the
//     key's end (EnableKey, CancelKeyDeletion, ImportKeyMaterial) with no
//     change to ledgerq; a plain error would end every queued task of the
//     wallet in error one after the other, where waiting, visibly, loses
//     nothing;
//   - anything else (AccessDeniedException, NotFoundException,
//     InvalidKeyUsageException, a malformed answer): a plain error, for the
//     configuration names a key ledgerq may not or cannot use.
package awskms

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Backend names the signer in *keystore.UnavailableError.
const Backend = "awskms"

const (
	// ThrottleRetryAfter is the wait after a throttled call that named none.
	ThrottleRetryAfter = time.Second
	// KeyStateRetryAfter is the wait after the key was disabled or in a state
	// that cannot sign: an operator has to act first.
	KeyStateRetryAfter = 30 * time.Second
)

// Config names the key and where KMS is.
type Config struct {
	// KeyID is the key: its id, its ARN, or an alias ("alias/…" or its ARN).
	KeyID string
	// Region is the key's region; empty takes the SDK's default chain's
	// (AWS_REGION, the shared config file).
	Region string
	// Endpoint is a KMS-compatible server's URL (e.g. local-kms); empty for
	// AWS's own endpoint of Region.
	Endpoint string
	// Address, when set, is the address the wallet is configured with: Open
	// refuses a key whose address differs.
	Address common.Address
	// Credentials, when set, replaces the SDK's default credential chain
	// (tests pass static ones).
	Credentials aws.CredentialsProvider
}

// Signer signs with one KMS key. Safe for concurrent use.
type Signer struct {
	client *kms.Client
	keyID  string // as configured, for String
	keyARN string // what GetPublicKey answered; Sign names it
	addr   common.Address
}

// Open reads the key's public key from KMS, checks that it is a secp256k1
// signing key and, when cfg.Address is set, that it is that address's key,
// and returns its signer.
func Open(ctx context.Context, cfg Config) (*Signer, error) {
	if cfg.KeyID == "" {
		return nil, errors.New("awskms: no key id")
	}
	client, err := newClient(ctx, cfg, "key "+cfg.KeyID)
	if err != nil {
		return nil, err
	}
	out, err := client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(cfg.KeyID)})
	if err != nil {
		return nil, fmt.Errorf("awskms: key %s: GetPublicKey: %w", cfg.KeyID, classify(err))
	}
	if out.KeySpec != kmstypes.KeySpecEccSecgP256k1 {
		return nil, fmt.Errorf("awskms: key %s is a %s key; an Ethereum wallet needs %s (secp256k1)", cfg.KeyID, out.KeySpec, kmstypes.KeySpecEccSecgP256k1)
	}
	if out.KeyUsage != kmstypes.KeyUsageTypeSignVerify {
		return nil, fmt.Errorf("awskms: key %s has the usage %s; signing needs %s", cfg.KeyID, out.KeyUsage, kmstypes.KeyUsageTypeSignVerify)
	}
	pub, err := ParsePublicKey(out.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("awskms: key %s: %w", cfg.KeyID, err)
	}
	addr := crypto.PubkeyToAddress(*pub)
	if cfg.Address != (common.Address{}) && cfg.Address != addr {
		return nil, fmt.Errorf("awskms: key %s is the key of %s, not of the configured address %s", cfg.KeyID, addr.Hex(), cfg.Address.Hex())
	}
	return &Signer{client: client, keyID: cfg.KeyID, keyARN: cmp.Or(aws.ToString(out.KeyId), cfg.KeyID), addr: addr}, nil
}

// newClient makes a KMS client of cfg's region, endpoint and credentials;
// what names the key (or the request) in its errors.
func newClient(ctx context.Context, cfg Config, what string) (*kms.Client, error) {
	opts := []func(*config.LoadOptions) error{}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("awskms: %s: loading the AWS configuration: %w", what, err)
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("awskms: %s: no region (configure one, or set AWS_REGION)", what)
	}
	return kms.NewFromConfig(awsCfg, func(o *kms.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// One attempt per call: the wallet lane retries, after the
		// UnavailableError's wait, and a call must fit its deadline.
		o.Retryer = aws.NopRetryer{}
	}), nil
}

// Address implements keystore.Signer.
func (s *Signer) Address() ledger.Address { return ledger.Address(s.addr) }

// Backend names the backend for keystore.BackendOf (metrics, the wallet's
// status).
func (s *Signer) Backend() string { return Backend }

// SignTx implements keystore.Signer: KMS signs tx's signing hash for
// chainID within ctx's deadline.
func (s *Signer) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	return keystore.SignDigestTx(ctx, tx, chainID, s.addr, s.signDigest)
}

func (s *Signer) signDigest(ctx context.Context, digest []byte) (r, sv *big.Int, err error) {
	out, err := s.client.Sign(ctx, &kms.SignInput{
		KeyId:            aws.String(s.keyARN),
		Message:          digest,
		MessageType:      kmstypes.MessageTypeDigest,
		SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("awskms: key %s: Sign: %w", s.keyID, classify(err))
	}
	return keystore.ParseDERSignature(out.Signature)
}

// String shows the key id and the address, nothing else.
func (s *Signer) String() string { return "awskms(" + s.keyID + ", " + s.addr.Hex() + ")" }

// classify returns err as a *keystore.UnavailableError when signing again
// later may succeed (see the package doc), else err.
func classify(err error) error {
	unavailable := func(after time.Duration) error {
		return &keystore.UnavailableError{Backend: Backend, Err: err, RetryAfter: after}
	}
	var status int
	var header http.Header
	if re, ok := errors.AsType[*awshttp.ResponseError](err); ok && re.Response != nil {
		status, header = re.HTTPStatusCode(), re.Response.Header
	}
	if api, ok := errors.AsType[smithy.APIError](err); ok {
		switch api.ErrorCode() {
		case "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded":
			return unavailable(retryAfter(header))
		case "KMSInternalException", "DependencyTimeoutException", "KeyUnavailableException", "ServiceUnavailableException", "InternalFailure":
			return unavailable(0)
		case "DisabledException", "KMSInvalidStateException":
			return unavailable(KeyStateRetryAfter)
		}
	}
	switch {
	case status == http.StatusTooManyRequests:
		return unavailable(retryAfter(header))
	case status >= 500:
		return unavailable(0)
	case status != 0:
		return err // an answer, and a refusal: the configuration's problem
	}
	if _, ok := errors.AsType[smithy.APIError](err); ok {
		return err
	}
	// No answer: the network, a timeout, the context's deadline.
	return unavailable(0)
}

// retryAfter reads a Retry-After header in seconds (KMS sends none today;
// a proxy in front of it may), else ThrottleRetryAfter.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := time.Until(t); d > 0 {
				return d
			}
		}
	}
	return ThrottleRetryAfter
}

var (
	oidECPublicKey = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	oidSecp256k1   = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
)

// subjectPublicKeyInfo is RFC 5480's SubjectPublicKeyInfo of an EC key
// on a named curve.
type subjectPublicKeyInfo struct {
	Algorithm struct {
		Algorithm  asn1.ObjectIdentifier
		Parameters asn1.ObjectIdentifier
	}
	PublicKey asn1.BitString
}

// ParsePublicKey reads a DER SubjectPublicKeyInfo of a secp256k1 key, as
// KMS's GetPublicKey answers: the 65-byte uncompressed point, checked to be
// on the curve.
func ParsePublicKey(der []byte) (*ecdsa.PublicKey, error) {
	var spki subjectPublicKeyInfo
	rest, err := asn1.Unmarshal(der, &spki)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading its public key: %w", err)
	case len(rest) > 0:
		return nil, errors.New("its public key has trailing bytes")
	case !spki.Algorithm.Algorithm.Equal(oidECPublicKey):
		return nil, fmt.Errorf("its public key's algorithm is %s, not ecPublicKey (%s)", spki.Algorithm.Algorithm, oidECPublicKey)
	case !spki.Algorithm.Parameters.Equal(oidSecp256k1):
		return nil, fmt.Errorf("its public key's curve is %s, not secp256k1 (%s)", spki.Algorithm.Parameters, oidSecp256k1)
	case spki.PublicKey.BitLength != 65*8:
		return nil, fmt.Errorf("its public key's point is %d bits, not an uncompressed point's 520", spki.PublicKey.BitLength)
	}
	pub, err := crypto.UnmarshalPubkey(spki.PublicKey.Bytes)
	if err != nil {
		return nil, fmt.Errorf("its public key's point: %w", err)
	}
	return pub, nil
}
