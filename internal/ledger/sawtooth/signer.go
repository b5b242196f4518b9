package sawtooth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

// Default transaction family of batches built by a Signer.
const (
	DefaultFamilyName    = "ledgerq"
	DefaultFamilyVersion = "1.0"
)

// Signer builds signed batches as a Sawtooth client does, with one key signing
// both the transactions and the batch. It is safe for concurrent use.
type Signer struct {
	priv          *secp256k1.PrivateKey
	pub           string
	familyName    string
	familyVersion string
	// noncePrefix is random per Signer and the counter counts within it, so
	// two Signers with one key (two processes, a restart) never build the same
	// header: signatures are deterministic (RFC 6979), so equal headers would
	// mean equal ids.
	noncePrefix string
	nonce       atomic.Uint64
}

// SignerOption configures a Signer.
type SignerOption func(*Signer)

// WithFamily sets the family name and version written in each transaction
// header (default DefaultFamilyName, DefaultFamilyVersion).
func WithFamily(name, version string) SignerOption {
	return func(s *Signer) {
		s.familyName = name
		s.familyVersion = version
	}
}

// WithNoncePrefix replaces the Signer's random nonce prefix. Two Signers with
// the same key and prefix build the same batches in the same order, which
// tests and reproducible benchmarks want; anything else should keep the
// random prefix.
func WithNoncePrefix(prefix string) SignerOption {
	return func(s *Signer) { s.noncePrefix = prefix }
}

// NewSigner returns a Signer that signs with priv.
func NewSigner(priv *secp256k1.PrivateKey, opts ...SignerOption) *Signer {
	var prefix [8]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = rand.Read(prefix[:])
	s := &Signer{
		priv:          priv,
		pub:           hex.EncodeToString(priv.PubKey().SerializeCompressed()),
		familyName:    DefaultFamilyName,
		familyVersion: DefaultFamilyVersion,
		noncePrefix:   hex.EncodeToString(prefix[:]) + "-",
	}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// GenerateSigner returns a Signer with a new random key.
func GenerateSigner(opts ...SignerOption) (*Signer, error) {
	priv, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		return nil, fmt.Errorf("generating secp256k1 key: %w", err)
	}
	return NewSigner(priv, opts...), nil
}

// PublicKey returns the signer's compressed public key in hex.
func (s *Signer) PublicKey() string { return s.pub }

// NewBatch builds and signs a batch holding one transaction per payload, in
// order, and returns its id (the batch header_signature) and the serialized
// Batch message. At least one payload is required.
func (s *Signer) NewBatch(txnPayloads ...[]byte) (id string, payload []byte, err error) {
	b, err := s.NewBatchMessage(txnPayloads...)
	if err != nil {
		return "", nil, err
	}
	payload, err = proto.Marshal(b)
	if err != nil {
		return "", nil, fmt.Errorf("encoding batch: %w", err)
	}
	return b.HeaderSignature, payload, nil
}

// NewBatchMessage is NewBatch returning the Batch message itself.
func (s *Signer) NewBatchMessage(txnPayloads ...[]byte) (*sawtoothpb.Batch, error) {
	if len(txnPayloads) == 0 {
		return nil, fmt.Errorf("building batch: no transaction payloads")
	}
	txns := make([]*sawtoothpb.Transaction, len(txnPayloads))
	ids := make([]string, len(txnPayloads))
	for i, p := range txnPayloads {
		txn, err := s.newTransaction(p)
		if err != nil {
			return nil, fmt.Errorf("building transaction %d: %w", i, err)
		}
		txns[i] = txn
		ids[i] = txn.HeaderSignature
	}
	header, sig, err := s.signHeader("batch", &sawtoothpb.BatchHeader{
		SignerPublicKey: s.pub,
		TransactionIds:  ids,
	})
	if err != nil {
		return nil, err
	}
	return &sawtoothpb.Batch{Header: header, HeaderSignature: sig, Transactions: txns}, nil
}

func (s *Signer) newTransaction(payload []byte) (*sawtoothpb.Transaction, error) {
	sum := sha512.Sum512(payload)
	header, sig, err := s.signHeader("transaction", &sawtoothpb.TransactionHeader{
		BatcherPublicKey: s.pub,
		FamilyName:       s.familyName,
		FamilyVersion:    s.familyVersion,
		Nonce:            s.noncePrefix + strconv.FormatUint(s.nonce.Add(1), 10),
		PayloadSha512:    hex.EncodeToString(sum[:]),
		SignerPublicKey:  s.pub,
	})
	if err != nil {
		return nil, err
	}
	return &sawtoothpb.Transaction{Header: header, HeaderSignature: sig, Payload: payload}, nil
}

// signHeader encodes a batch's or a transaction's header and signs it:
// Sawtooth names both by their header's signature.
func (s *Signer) signHeader(what string, h proto.Message) ([]byte, string, error) {
	header, err := proto.Marshal(h)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %s header: %w", what, err)
	}
	return header, s.sign(header), nil
}

// sign returns Sawtooth's signature of msg: r‖s over SHA-256(msg), in hex.
// ecdsa.Sign already gives the low-s form validators require.
func (s *Signer) sign(msg []byte) string {
	hash := sha256.Sum256(msg)
	sig := ecdsa.Sign(s.priv, hash[:])
	r, sv := sig.R(), sig.S()
	var raw [64]byte
	r.PutBytesUnchecked(raw[:32])
	sv.PutBytesUnchecked(raw[32:])
	return hex.EncodeToString(raw[:])
}
