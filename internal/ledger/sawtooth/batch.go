package sawtooth

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

var (
	// ErrMalformedBatch means a payload is not a Sawtooth batch at all: it does
	// not decode, has no well-formed header_signature, or its header does not
	// decode.
	ErrMalformedBatch = errors.New("malformed batch")
	// ErrInvalidBatch means a batch decodes but a validator would refuse it: a
	// signature does not verify, or the header does not match the
	// transactions.
	ErrInvalidBatch = errors.New("invalid batch")
)

// idLen is the length of a Sawtooth id: a 64-byte signature in hex.
const idLen = 128

// IsID reports whether s has the form of a Sawtooth batch or transaction id:
// 128 lower case hex characters. Sawtooth's REST API refuses anything else as
// an id, and ids are compared as strings, so only one spelling is accepted.
func IsID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseBatch decodes a serialized Batch message and checks that it carries a
// well-formed header_signature (its id) and a header that decodes. It does not
// check signatures; VerifyBatch does. Errors wrap ErrMalformedBatch.
func ParseBatch(payload []byte) (*sawtoothpb.Batch, error) {
	if len(payload) == 0 {
		return nil, fmt.Errorf("%w: empty payload", ErrMalformedBatch)
	}
	var b sawtoothpb.Batch
	if err := proto.Unmarshal(payload, &b); err != nil {
		return nil, fmt.Errorf("%w: decoding batch: %v", ErrMalformedBatch, err)
	}
	if b.HeaderSignature == "" {
		return nil, fmt.Errorf("%w: header_signature is missing", ErrMalformedBatch)
	}
	if !IsID(b.HeaderSignature) {
		return nil, fmt.Errorf("%w: header_signature is not 128 lower case hex characters", ErrMalformedBatch)
	}
	if len(b.Header) == 0 {
		return nil, fmt.Errorf("%w: header is missing", ErrMalformedBatch)
	}
	var h sawtoothpb.BatchHeader
	if err := proto.Unmarshal(b.Header, &h); err != nil {
		return nil, fmt.Errorf("%w: decoding batch header: %v", ErrMalformedBatch, err)
	}
	return &b, nil
}

// VerifyBatch checks a batch the way a Sawtooth validator does before taking
// it: the batch header's signature verifies under its signer_public_key; the
// header lists exactly the transactions' ids, in order; and each transaction's
// header decodes, names the batch signer as its batcher, carries the SHA-512 of
// its payload and is signed by its own signer_public_key. Errors wrap
// ErrInvalidBatch, or ErrMalformedBatch for parts that do not decode.
func VerifyBatch(b *sawtoothpb.Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrMalformedBatch)
	}
	var h sawtoothpb.BatchHeader
	if err := proto.Unmarshal(b.Header, &h); err != nil {
		return fmt.Errorf("%w: decoding batch header: %v", ErrMalformedBatch, err)
	}
	if err := verifySignature(h.SignerPublicKey, b.Header, b.HeaderSignature); err != nil {
		return fmt.Errorf("%w: batch %s: %v", ErrInvalidBatch, short(b.HeaderSignature), err)
	}
	if len(b.Transactions) == 0 {
		return fmt.Errorf("%w: batch %s has no transactions", ErrInvalidBatch, short(b.HeaderSignature))
	}
	if len(h.TransactionIds) != len(b.Transactions) {
		return fmt.Errorf("%w: batch %s header lists %d transactions, batch holds %d",
			ErrInvalidBatch, short(b.HeaderSignature), len(h.TransactionIds), len(b.Transactions))
	}
	for i, txn := range b.Transactions {
		if txn.HeaderSignature != h.TransactionIds[i] {
			return fmt.Errorf("%w: batch %s transaction %d is not the one its header lists",
				ErrInvalidBatch, short(b.HeaderSignature), i)
		}
		if err := verifyTransaction(txn, h.SignerPublicKey); err != nil {
			return fmt.Errorf("batch %s transaction %d: %w", short(b.HeaderSignature), i, err)
		}
	}
	return nil
}

// ParseAndVerifyBatch is ParseBatch followed by VerifyBatch: the full check an
// API makes before it stores a batch, and the check a validator makes before
// it takes one.
func ParseAndVerifyBatch(payload []byte) (*sawtoothpb.Batch, error) {
	b, err := ParseBatch(payload)
	if err != nil {
		return nil, err
	}
	if err := VerifyBatch(b); err != nil {
		return nil, err
	}
	return b, nil
}

func verifyTransaction(txn *sawtoothpb.Transaction, batcher string) error {
	if !IsID(txn.HeaderSignature) {
		return fmt.Errorf("%w: header_signature is not 128 lower case hex characters", ErrMalformedBatch)
	}
	var th sawtoothpb.TransactionHeader
	if err := proto.Unmarshal(txn.Header, &th); err != nil {
		return fmt.Errorf("%w: decoding transaction header: %v", ErrMalformedBatch, err)
	}
	if th.BatcherPublicKey != batcher {
		return fmt.Errorf("%w: batcher_public_key is not the batch signer", ErrInvalidBatch)
	}
	sum := sha512.Sum512(txn.Payload)
	if th.PayloadSha512 != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("%w: payload_sha512 does not match the payload", ErrInvalidBatch)
	}
	if err := verifySignature(th.SignerPublicKey, txn.Header, txn.HeaderSignature); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBatch, err)
	}
	return nil
}

// verifySignature checks a Sawtooth signature: 64 compact bytes r‖s in hex
// over the SHA-256 of msg. Like libsecp256k1, which Sawtooth validators use, it
// refuses a signature whose s is in the upper half of the group order, so a
// batch cannot be given a second id by negating s.
func verifySignature(pubHex string, msg []byte, sigHex string) error {
	var pubBytes [33]byte
	if hex.DecodedLen(len(pubHex)) != len(pubBytes) {
		return errors.New("signer public key is not a compressed secp256k1 key in hex")
	}
	if _, err := hex.Decode(pubBytes[:], []byte(pubHex)); err != nil {
		return fmt.Errorf("decoding signer public key: %w", err)
	}
	var sig [64]byte
	if hex.DecodedLen(len(sigHex)) != len(sig) {
		return errors.New("signature is not 64 bytes in hex")
	}
	if _, err := hex.Decode(sig[:], []byte(sigHex)); err != nil {
		return fmt.Errorf("decoding signature: %w", err)
	}
	var r, s secp256k1.ModNScalar
	if r.SetByteSlice(sig[:32]) || r.IsZero() {
		return errors.New("signature r is out of range")
	}
	if s.SetByteSlice(sig[32:]) || s.IsZero() {
		return errors.New("signature s is out of range")
	}
	if s.IsOverHalfOrder() {
		return errors.New("signature s is not normalized (high s)")
	}
	hash := sha256.Sum256(msg)
	// go-ethereum's VerifySignature is libsecp256k1's verify (the
	// validators' own) when built with cgo, about four times faster than the
	// pure Go one, which it falls back to without cgo.
	if !crypto.VerifySignature(pubBytes[:], hash[:], sig[:]) {
		// VerifySignature also refuses a key that is not on the curve; only
		// then is the key parsed again, to say which of the two it was (a
		// parse on every check cost an eighth of an intake's CPU).
		if _, err := secp256k1.ParsePubKey(pubBytes[:]); err != nil {
			return fmt.Errorf("parsing signer public key: %w", err)
		}
		return errors.New("signature does not verify")
	}
	return nil
}

// AppendBatchList appends to dst a serialized BatchList holding the given
// serialized Batch messages, byte for byte. Building the list from the stored
// bytes, rather than decoding and re-encoding each batch, sends exactly what
// the application signed.
func AppendBatchList(dst []byte, batches ...[]byte) []byte {
	for _, b := range batches {
		dst = protowire.AppendTag(dst, batchListBatchesField, protowire.BytesType)
		dst = protowire.AppendBytes(dst, b)
	}
	return dst
}

// SplitBatchList returns the serialized Batch messages of a serialized
// BatchList, as sub-slices of body, in order. Other fields are skipped, as a
// protobuf decoder would. Errors wrap ErrMalformedBatch.
func SplitBatchList(body []byte) ([][]byte, error) {
	var out [][]byte
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nil, fmt.Errorf("%w: batch list: %v", ErrMalformedBatch, protowire.ParseError(n))
		}
		body = body[n:]
		if num == batchListBatchesField && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(body)
			if m < 0 {
				return nil, fmt.Errorf("%w: batch list: %v", ErrMalformedBatch, protowire.ParseError(m))
			}
			out = append(out, v)
			body = body[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, body)
		if m < 0 {
			return nil, fmt.Errorf("%w: batch list: %v", ErrMalformedBatch, protowire.ParseError(m))
		}
		body = body[m:]
	}
	return out, nil
}

// batchListBatchesField is BatchList.batches' field number.
const batchListBatchesField protowire.Number = 1

// short abbreviates an id for error messages.
func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// CheckBatchForID is the intake check of the batch lane: payload is a
// Sawtooth Batch message with valid signatures, and its header_signature is
// id. The API runs it on every posted batch.
func CheckBatchForID(id string, payload []byte) error {
	b, err := ParseAndVerifyBatch(payload)
	if err != nil {
		return err
	}
	if b.HeaderSignature != id {
		return fmt.Errorf("header_signature %.16s… is not the batch id", b.HeaderSignature)
	}
	return nil
}

// DecodeBatchHeader decodes b's header: the batch signer's public key and the
// ids of its transactions, in order. Errors wrap ErrMalformedBatch.
func DecodeBatchHeader(b *sawtoothpb.Batch) (*sawtoothpb.BatchHeader, error) {
	var h sawtoothpb.BatchHeader
	if err := proto.Unmarshal(b.GetHeader(), &h); err != nil {
		return nil, fmt.Errorf("%w: decoding batch header: %v", ErrMalformedBatch, err)
	}
	return &h, nil
}

// TransactionIDs returns the ids of the transactions of a serialized Batch,
// in order, as its header lists them (as the transactions' own
// header_signatures when the header lists none). Errors wrap
// ErrMalformedBatch.
func TransactionIDs(payload []byte) ([]string, error) {
	b, err := ParseBatch(payload)
	if err != nil {
		return nil, err
	}
	h, err := DecodeBatchHeader(b)
	if err != nil {
		return nil, err
	}
	if len(h.TransactionIds) > 0 {
		return h.TransactionIds, nil
	}
	ids := make([]string, len(b.Transactions))
	for i, txn := range b.Transactions {
		ids[i] = txn.HeaderSignature
	}
	return ids, nil
}
