package sawtoothpb_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

// TestMessages_UseSawtoothsFieldNumbers pins every field number to the one in
// Sawtooth's published protos: a wrong number still compiles and round-trips
// here, but a real validator would read different fields, and every
// signature and id would be over different bytes.
func TestMessages_UseSawtoothsFieldNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg    proto.Message
		fields map[string]protoreflect.FieldNumber
	}{
		{&sawtoothpb.BatchHeader{}, map[string]protoreflect.FieldNumber{
			"signer_public_key": 1, "transaction_ids": 2,
		}},
		{&sawtoothpb.Batch{}, map[string]protoreflect.FieldNumber{
			"header": 1, "header_signature": 2, "transactions": 3, "trace": 4,
		}},
		{&sawtoothpb.BatchList{}, map[string]protoreflect.FieldNumber{
			"batches": 1,
		}},
		{&sawtoothpb.TransactionHeader{}, map[string]protoreflect.FieldNumber{
			"batcher_public_key": 1, "dependencies": 2, "family_name": 3, "family_version": 4,
			"inputs": 5, "nonce": 6, "outputs": 7, "payload_sha512": 9, "signer_public_key": 10,
		}},
		{&sawtoothpb.Transaction{}, map[string]protoreflect.FieldNumber{
			"header": 1, "header_signature": 2, "payload": 3,
		}},
	} {
		desc := tc.msg.ProtoReflect().Descriptor()
		got := map[string]protoreflect.FieldNumber{}
		for i := range desc.Fields().Len() {
			f := desc.Fields().Get(i)
			got[string(f.Name())] = f.Number()
		}
		require.Equal(t, tc.fields, got, string(desc.Name()))
	}
}

// TestBatch_KnownEncoding checks the generated code against bytes written by
// hand from the protobuf wire format, so the types agree with the wire, not
// only with themselves.
func TestBatch_KnownEncoding(t *testing.T) {
	t.Parallel()
	b := &sawtoothpb.Batch{
		Header:          []byte{0x01},
		HeaderSignature: "ab",
		Transactions:    []*sawtoothpb.Transaction{{Payload: []byte("p")}},
		Trace:           true,
	}
	got, err := proto.MarshalOptions{Deterministic: true}.Marshal(b)
	require.NoError(t, err)
	require.Equal(t, []byte{
		0x0a, 0x01, 0x01, // 1: header
		0x12, 0x02, 'a', 'b', // 2: header_signature
		0x1a, 0x03, 0x1a, 0x01, 'p', // 3: transactions { 3: payload }
		0x20, 0x01, // 4: trace
	}, got)
}
