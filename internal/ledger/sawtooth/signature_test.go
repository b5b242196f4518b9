package sawtooth

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

// Vectors from Sawtooth's own signing tests (sawtooth_signing, secp256k1):
// a batch signed here must carry byte for byte the signature a Sawtooth SDK
// would compute, or the batch id would differ.
const (
	sawtoothKey1Priv = "2f1e7b7a130d7ba9da0068b3bb0ba1d79e7e77110302c9f746c3c2a63fe40088"
	sawtoothKey1Pub  = "026a2c795a9776f75464aa3bda3534c3154a6e91b357b1181d3f515110f84b67c5"
	sawtoothMsg1Sig  = "5195115d9be2547b720ee74c23dd841842875db6eae1f5da8605b050a49e702b4aa83be72ab7e3cb20f17c657011b49f4c8632be2745ba4de79e6aa05da57b35"
	sawtoothKey2Priv = "51b845c2cdde22fe646148f0b51eaf5feec8c82ee921d5e0cbe7619f3bb9c62d"
	sawtoothKey2Pub  = "039c20a66b4ec7995391dbec1d8bb0e2c6e6fd63cd259ed5b877cb4ea98858cf6d"
	sawtoothMsg2Sig  = "d589c7b1fa5f8a4c5a389de80ae9582c2f7f2a5e21bab5450b670214e5b1c1235e9eb8102fd0ca690a8b42e2c406a682bd57f6daf6e142e5fa4b2c26ef40a490"
)

func signerFromHex(t *testing.T, privHex string) *Signer {
	t.Helper()
	raw, err := hex.DecodeString(privHex)
	require.NoError(t, err)
	return NewSigner(secp256k1.PrivKeyFromBytes(raw))
}

func TestSigner_SignaturesMatchSawtoothSDKVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		priv, pub, msg, sig string
	}{
		{sawtoothKey1Priv, sawtoothKey1Pub, "test", sawtoothMsg1Sig},
		{sawtoothKey2Priv, sawtoothKey2Pub, "test2", sawtoothMsg2Sig},
	} {
		s := signerFromHex(t, tc.priv)
		require.Equal(t, tc.pub, s.PublicKey())
		require.Equal(t, tc.sig, s.sign([]byte(tc.msg)))
		require.NoError(t, verifySignature(tc.pub, []byte(tc.msg), tc.sig))
	}
}

func TestVerifySignature_RefusesWrongMessageKeyOrHighS(t *testing.T) {
	t.Parallel()
	require.Error(t, verifySignature(sawtoothKey1Pub, []byte("test2"), sawtoothMsg1Sig), "other message")
	require.Error(t, verifySignature(sawtoothKey2Pub, []byte("test"), sawtoothMsg1Sig), "other key")

	// Negating s gives a second valid ECDSA signature for the same message;
	// Sawtooth validators refuse it, and so must we.
	raw, err := hex.DecodeString(sawtoothMsg1Sig)
	require.NoError(t, err)
	var s secp256k1.ModNScalar
	s.SetByteSlice(raw[32:])
	s.Negate()
	s.PutBytesUnchecked(raw[32:])
	require.ErrorContains(t, verifySignature(sawtoothKey1Pub, []byte("test"), hex.EncodeToString(raw)), "high s")

	require.Error(t, verifySignature(sawtoothKey1Pub, []byte("test"), sawtoothMsg1Sig[:126]), "short signature")
	require.Error(t, verifySignature(sawtoothKey1Pub[:64], []byte("test"), sawtoothMsg1Sig), "short key")

	// A key that is not a point of the curve is named as such, not as a
	// signature that fails: x = 5 has no y on secp256k1.
	notOnCurve := "02" + strings.Repeat("0", 63) + "5"
	require.ErrorContains(t, verifySignature(notOnCurve, []byte("test"), sawtoothMsg1Sig), "parsing signer public key")
	require.EqualError(t, verifySignature(sawtoothKey2Pub, []byte("test"), sawtoothMsg1Sig), "signature does not verify")
}

func TestVerifyBatch_RefusesTransactionBatchedByAnotherKey(t *testing.T) {
	t.Parallel()
	s := signerFromHex(t, sawtoothKey1Priv)
	other := signerFromHex(t, sawtoothKey2Priv)
	foreign, err := other.NewBatchMessage([]byte("p"))
	require.NoError(t, err)
	txn := foreign.Transactions[0]

	// A batch correctly signed by s around a transaction whose header names
	// other as its batcher: only the batcher check can catch it.
	header, err := proto.Marshal(&sawtoothpb.BatchHeader{
		SignerPublicKey: s.PublicKey(),
		TransactionIds:  []string{txn.HeaderSignature},
	})
	require.NoError(t, err)
	b := &sawtoothpb.Batch{Header: header, HeaderSignature: s.sign(header), Transactions: []*sawtoothpb.Transaction{txn}}
	require.ErrorIs(t, VerifyBatch(b), ErrInvalidBatch)
	require.ErrorContains(t, VerifyBatch(b), "batcher_public_key")
}
