package sawtooth_test

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

// testSigner returns a Signer with a fixed key and nonce prefix, so the
// batches a test builds are the same on every run.
func testSigner(t testing.TB, seed byte) *sawtooth.Signer {
	t.Helper()
	key := make([]byte, 32)
	key[31] = seed
	key[0] = 0x42
	return sawtooth.NewSigner(secp256k1.PrivKeyFromBytes(key), sawtooth.WithNoncePrefix(fmt.Sprintf("test%d-", seed)))
}

func newBatch(t testing.TB, s *sawtooth.Signer, payloads ...[]byte) (string, []byte) {
	t.Helper()
	id, payload, err := s.NewBatch(payloads...)
	require.NoError(t, err)
	return id, payload
}

func TestSigner_NewBatchBuildsAVerifiableSawtoothBatch(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 1)
	id, payload := newBatch(t, s, []byte("one"), []byte("two"))

	require.True(t, sawtooth.IsID(id))
	b, err := sawtooth.ParseAndVerifyBatch(payload)
	require.NoError(t, err)
	require.Equal(t, id, b.HeaderSignature)
	require.Len(t, b.Transactions, 2)

	var h sawtoothpb.BatchHeader
	require.NoError(t, proto.Unmarshal(b.Header, &h))
	require.Equal(t, s.PublicKey(), h.SignerPublicKey)
	require.Len(t, s.PublicKey(), 66, "compressed public key in hex")
	for i, want := range []string{"one", "two"} {
		txn := b.Transactions[i]
		require.Equal(t, h.TransactionIds[i], txn.HeaderSignature)
		require.Equal(t, want, string(txn.Payload))
		var th sawtoothpb.TransactionHeader
		require.NoError(t, proto.Unmarshal(txn.Header, &th))
		sum := sha512.Sum512([]byte(want))
		require.Equal(t, hex.EncodeToString(sum[:]), th.PayloadSha512)
		require.Equal(t, sawtooth.DefaultFamilyName, th.FamilyName)
		require.Equal(t, sawtooth.DefaultFamilyVersion, th.FamilyVersion)
		require.Equal(t, s.PublicKey(), th.BatcherPublicKey)
		require.Equal(t, s.PublicKey(), th.SignerPublicKey)
		require.NotEmpty(t, th.Nonce)
	}
}

func TestSigner_SamePayloadTwiceGivesDistinctBatches(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 1)
	id1, _ := newBatch(t, s, []byte("same"))
	id2, _ := newBatch(t, s, []byte("same"))
	require.NotEqual(t, id1, id2)

	// Two signers with one key and their own random prefixes do not collide
	// either (a restarted process, a second bench worker).
	key := make([]byte, 32)
	key[31] = 7
	a := sawtooth.NewSigner(secp256k1.PrivKeyFromBytes(key))
	b := sawtooth.NewSigner(secp256k1.PrivKeyFromBytes(key))
	ida, _ := newBatch(t, a, []byte("same"))
	idb, _ := newBatch(t, b, []byte("same"))
	require.NotEqual(t, ida, idb)
}

func TestSigner_FixedNoncePrefixIsReproducible(t *testing.T) {
	t.Parallel()
	id1, p1 := newBatch(t, testSigner(t, 3), []byte("x"))
	id2, p2 := newBatch(t, testSigner(t, 3), []byte("x"))
	require.Equal(t, id1, id2)
	require.Equal(t, p1, p2)
}

func TestSigner_WithFamilySetsFamilyInHeaders(t *testing.T) {
	t.Parallel()
	s, err := sawtooth.GenerateSigner(sawtooth.WithFamily("grid_product", "2"))
	require.NoError(t, err)
	_, payload := newBatch(t, s, []byte("p"))
	b, err := sawtooth.ParseAndVerifyBatch(payload)
	require.NoError(t, err)
	var th sawtoothpb.TransactionHeader
	require.NoError(t, proto.Unmarshal(b.Transactions[0].Header, &th))
	require.Equal(t, "grid_product", th.FamilyName)
	require.Equal(t, "2", th.FamilyVersion)
}

func TestSigner_NewBatchWithoutPayloadsFails(t *testing.T) {
	t.Parallel()
	_, _, err := testSigner(t, 1).NewBatch()
	require.Error(t, err)
}

func TestParseBatch_RefusesPayloadsThatAreNotBatches(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 1)
	_, good := newBatch(t, s, []byte("p"))
	b, err := sawtooth.ParseBatch(good)
	require.NoError(t, err)

	mutate := func(f func(*sawtoothpb.Batch)) []byte {
		c := proto.Clone(b).(*sawtoothpb.Batch)
		f(c)
		out, err := proto.Marshal(c)
		require.NoError(t, err)
		return out
	}
	for name, payload := range map[string][]byte{
		"empty":                 nil,
		"garbage":               []byte("\xff\xff\xff\xff not a protobuf"),
		"no header signature":   mutate(func(c *sawtoothpb.Batch) { c.HeaderSignature = "" }),
		"short signature":       mutate(func(c *sawtoothpb.Batch) { c.HeaderSignature = c.HeaderSignature[:100] }),
		"upper case signature":  mutate(func(c *sawtoothpb.Batch) { c.HeaderSignature = "A" + c.HeaderSignature[1:] }),
		"no header":             mutate(func(c *sawtoothpb.Batch) { c.Header = nil }),
		"header does not parse": mutate(func(c *sawtoothpb.Batch) { c.Header = []byte{0xff, 0xff, 0xff} }),
	} {
		_, err := sawtooth.ParseBatch(payload)
		require.ErrorIs(t, err, sawtooth.ErrMalformedBatch, name)
	}
}

func TestVerifyBatch_RefusesWhatAValidatorRefuses(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 1)
	_, good := newBatch(t, s, []byte("p"), []byte("q"))
	b, err := sawtooth.ParseBatch(good)
	require.NoError(t, err)
	require.NoError(t, sawtooth.VerifyBatch(b))

	flip := func(sig string) string {
		c := []byte(sig)
		if c[10] == '0' {
			c[10] = '1'
		} else {
			c[10] = '0'
		}
		return string(c)
	}
	for name, f := range map[string]func(*sawtoothpb.Batch){
		"batch signature altered": func(c *sawtoothpb.Batch) { c.HeaderSignature = flip(c.HeaderSignature) },
		"batch header altered":    func(c *sawtoothpb.Batch) { c.Header = append(c.Header, 0x18, 0x01) },
		"payload altered":         func(c *sawtoothpb.Batch) { c.Transactions[0].Payload = []byte("P") },
		"transaction signature altered": func(c *sawtoothpb.Batch) {
			c.Transactions[0].HeaderSignature = flip(c.Transactions[0].HeaderSignature)
		},
		"transactions reordered": func(c *sawtoothpb.Batch) {
			c.Transactions[0], c.Transactions[1] = c.Transactions[1], c.Transactions[0]
		},
		"transaction dropped": func(c *sawtoothpb.Batch) { c.Transactions = c.Transactions[:1] },
		"no transactions":     func(c *sawtoothpb.Batch) { c.Transactions = nil },
	} {
		c := proto.Clone(b).(*sawtoothpb.Batch)
		f(c)
		err := sawtooth.VerifyBatch(c)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, sawtooth.ErrInvalidBatch) || errors.Is(err, sawtooth.ErrMalformedBatch), "%s: %v", name, err)
	}
}

func TestBatchList_AppendAndSplitRoundTripThroughProtobuf(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 1)
	var payloads [][]byte
	for i := range 3 {
		_, p := newBatch(t, s, fmt.Appendf(nil, "p%d", i))
		payloads = append(payloads, p)
	}
	list := sawtooth.AppendBatchList(nil, payloads...)

	// The hand-built list is a real BatchList message.
	var bl sawtoothpb.BatchList
	require.NoError(t, proto.Unmarshal(list, &bl))
	require.Len(t, bl.Batches, 3)
	for i, b := range bl.Batches {
		want, err := sawtooth.ParseBatch(payloads[i])
		require.NoError(t, err)
		require.True(t, proto.Equal(want, b))
	}
	// And a list built by protobuf splits back into the exact bytes.
	encoded, err := proto.Marshal(&bl)
	require.NoError(t, err)
	split, err := sawtooth.SplitBatchList(encoded)
	require.NoError(t, err)
	require.Equal(t, payloads, split)

	_, err = sawtooth.SplitBatchList([]byte{0x0a, 0x05, 0x01})
	require.ErrorIs(t, err, sawtooth.ErrMalformedBatch)
	empty, err := sawtooth.SplitBatchList(nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

func BenchmarkSigner_NewBatch(b *testing.B) {
	s := testSigner(b, 1)
	payload := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.NewBatch(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAndVerifyBatch(b *testing.B) {
	s := testSigner(b, 1)
	_, payload := newBatch(b, s, make([]byte, 256))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sawtooth.ParseAndVerifyBatch(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTransactionIDs_AreTheHeadersListInOrder(t *testing.T) {
	t.Parallel()
	s := testSigner(t, 7)
	_, payload := newBatch(t, s, []byte("one"), []byte("two"), []byte("three"))
	b, err := sawtooth.ParseBatch(payload)
	require.NoError(t, err)
	h, err := sawtooth.DecodeBatchHeader(b)
	require.NoError(t, err)
	require.Equal(t, s.PublicKey(), h.SignerPublicKey)

	ids, err := sawtooth.TransactionIDs(payload)
	require.NoError(t, err)
	require.Len(t, ids, 3)
	for i, txn := range b.Transactions {
		require.Equal(t, txn.HeaderSignature, ids[i])
	}

	_, err = sawtooth.TransactionIDs(nil)
	require.ErrorIs(t, err, sawtooth.ErrMalformedBatch)
	_, err = sawtooth.TransactionIDs([]byte("\xff\xff"))
	require.ErrorIs(t, err, sawtooth.ErrMalformedBatch)
}
