package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// decodeBatches checks a request's items on several cores (inParallel), yet
// answers as a loop over them would: every item decoded when all are good, and otherwise
// the first bad item in request order, even when a later one fails first.
func TestDecodeBatches_AnswersAsALoopInRequestOrder(t *testing.T) {
	t.Parallel()
	items := make([]json.RawMessage, 64)
	for i := range items {
		items[i] = json.RawMessage(strconv.Itoa(i))
	}
	var calls atomic.Int64
	decode := func(bad ...int) func(json.RawMessage) (store.NewBatch, *Error) {
		return func(raw json.RawMessage) (store.NewBatch, *Error) {
			calls.Add(1)
			i, _ := strconv.Atoi(string(raw))
			for _, b := range bad {
				if i == b {
					if i == bad[0] {
						// The first bad item is slow: a later one fails first.
						time.Sleep(20 * time.Millisecond)
					}
					return store.NewBatch{}, errorf(http.StatusBadRequest, "item %d is bad", i)
				}
			}
			return store.NewBatch{ID: "b" + string(raw)}, nil
		}
	}

	got, _, bad := decodeBatches(items, decode())
	require.Nil(t, bad)
	require.Len(t, got, len(items))
	for i, b := range got {
		require.Equal(t, "b"+strconv.Itoa(i), b.ID, "item %d in its place", i)
	}
	require.EqualValues(t, len(items), calls.Load())

	for range 20 {
		_, i, bad := decodeBatches(items, decode(5, 6, 40))
		require.NotNil(t, bad)
		require.Equal(t, 5, i)
		require.Equal(t, "item 5 is bad", bad.Message)
	}
	_, i, bad := decodeBatches(items[:1], decode(0))
	require.Equal(t, 0, i)
	require.Equal(t, "item 0 is bad", bad.Message)
}

// The CPU an intake spends on one batch of a request, in parts: the strict
// JSON decoding of an item, and the full check of its payload (protobuf,
// two signature checks). go test -bench Intake ./internal/httpapi/
func BenchmarkIntake(b *testing.B) {
	s, err := sawtooth.GenerateSigner()
	require.NoError(b, err)
	id, payload, err := s.NewBatch([]byte("payload"))
	require.NoError(b, err)
	item := json.RawMessage(`{"id":"` + id + `","service_id":"bench-svc","payload":"` + base64.StdEncoding.EncodeToString(payload) + `"}`)
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var nb apigen.NewBatch
			if err := strictUnmarshal(item, &nb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if err := sawtooth.CheckBatchForID(id, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
