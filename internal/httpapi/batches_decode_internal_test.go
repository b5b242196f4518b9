package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
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
	b.Run("json-fast", func(b *testing.B) {
		for b.Loop() {
			if _, ok := fastNewBatch(item); !ok {
				b.Fatal("the fast path left a plain batch to the strict decoder")
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

// fastNewBatchCases are batch objects of every shape the intake meets: the
// common ones the fast path must take, and ones it must leave to the strict
// decoder (which refuses most of them, and decodes the rest differently
// from the text: escapes, null).
var fastNewBatchCases = []struct {
	in   string
	fast bool
}{
	{`{"id":"a","service_id":"s","payload":"cA=="}`, true},
	{` { "payload" : "cA==" ,"id":"a",` + "\n\t" + `"service_id":"s" } ` + "\r\n", true},
	{`{"id":"a","service_id":"s","payload":"cA==","created_at":"2026-01-02T15:04:05Z"}`, true},
	{`{"id":"ä✓","service_id":"s","payload":""}`, true},
	{`{"id":"a"}`, true},
	{`{"id":"a\"b","service_id":"s","payload":"cA=="}`, false},
	{`{"id":"a\u0062","service_id":"s","payload":"cA=="}`, false},
	{`{"id":"a","service_id":"s","payload":"cA==","created_at":null}`, false},
	{`{"id":"a","id":"b","service_id":"s","payload":"cA=="}`, false},
	{`{"id":"a","ID":"b","service_id":"s","payload":"cA=="}`, false},
	{`{"Id":"a","service_id":"s","payload":"cA=="}`, false},
	{`{"id":"a","service_id":"s","payload":"cA==","extra":"x"}`, false},
	{`{"id":1,"service_id":"s","payload":"cA=="}`, false},
	{`{"id":"a","service_id":["s"],"payload":"cA=="}`, false},
	{`{"id":"a","service_id":"s","payload":"cA=="}x`, false},
	{`{"id":"a","service_id":"s","payload":"cA==",}`, false},
	{`{}`, false},
	{`[]`, false},
	{`"id"`, false},
	{`{"id":"a` + "\x01" + `","service_id":"s","payload":"cA=="}`, false},
}

// The fast path reads only what it can read exactly as the strict decoder
// does: for every input it takes, strictUnmarshal takes it too and gives the
// same batch. Random edits of the cases (a byte changed, dropped or
// doubled) hunt for an input where the two part.
func TestFastNewBatch_TakesOnlyWhatTheStrictDecoderReadsTheSame(t *testing.T) {
	t.Parallel()
	same := func(t *testing.T, in []byte) bool {
		t.Helper()
		fast, ok := fastNewBatch(in)
		if !ok {
			return false
		}
		var strict apigen.NewBatch
		require.Nil(t, strictUnmarshal(in, &strict), "the fast path took %q, the strict decoder refused it", in)
		require.Equal(t, strict, fast, "decoding %q", in)
		return true
	}
	for _, c := range fastNewBatchCases {
		require.Equal(t, c.fast, same(t, []byte(c.in)), "fast path on %q", c.in)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":, \"\\azAZ019_-` + "\t\n\x01")
	took := 0
	for range 20000 {
		in := []byte(fastNewBatchCases[rnd.IntN(len(fastNewBatchCases))].in)
		for range 1 + rnd.IntN(3) {
			if len(in) == 0 {
				break
			}
			i := rnd.IntN(len(in))
			switch rnd.IntN(3) {
			case 0:
				in[i] = alphabet[rnd.IntN(len(alphabet))]
			case 1:
				in = append(in[:i:i], in[i+1:]...)
			default:
				in = append(in[:i+1:i+1], in[i:]...)
			}
		}
		if !utf8.Valid(in) {
			continue // refused before any item is decoded (checkJSONText)
		}
		if same(t, in) {
			took++
		}
	}
	require.Greater(t, took, 100, "the edits left the fast path something to take")
}

// splitArray gives an array's elements as encoding/json does, whitespace,
// nesting and strings holding brackets and escaped quotes included.
func TestSplitArray_GivesTheElementsEncodingJSONGives(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[]`, ` [ ] `, `[{}]`, `[1,"two",null,true,{"a":[1,{"b":"]"}]},[[]]]`,
		"[\n {\"id\":\"a\\\"],{\"} ,\t{\"id\":\"b\"}\r\n]",
		`[{"id":"a","service_id":"s","payload":"cA=="},{"id":"b","service_id":"s","payload":"cA=="}]`,
		`["\\",  "\\\"[", 0.5e3 ]`,
	} {
		var want []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(in), &want), in)
		got := splitArray([]byte(in))
		require.NotNil(t, got, in)
		require.Len(t, got, len(want), in)
		for i := range want {
			require.Equal(t, string(want[i]), string(got[i]), "element %d of %s", i, in)
		}
	}
	for _, in := range []string{`{"a":[1]}`, `"[1]"`, `1`} {
		require.Nil(t, splitArray([]byte(in)), in)
	}
}

// decodeJSON finds a body's one value in one pass when it is wanted as raw
// text, and gives the bytes the decoder would give; what is not one valid
// value still gets the decoder's errors.
func TestDecodeJSON_RawTextIsTheDecodersValue(t *testing.T) {
	t.Parallel()
	decode := func(body string) (json.RawMessage, error) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		var raw json.RawMessage
		err := decodeJSON(echo.New().NewContext(req, httptest.NewRecorder()), &raw)
		return raw, err
	}
	for _, body := range []string{`[]`, " \n[1, {\"a\":\"]\"}]\t\r\n", `{"id":"a"}`, `"x"`, ` 12 `, `null`} {
		var want json.RawMessage
		require.NoError(t, json.NewDecoder(strings.NewReader(body)).Decode(&want), body)
		got, err := decode(body)
		require.NoError(t, err, body)
		require.Equal(t, string(want), string(got), "body %q", body)
	}
	for body, msg := range map[string]string{
		``:          "request body is empty",
		`[1] [2]`:   "request body must hold one JSON value",
		`[1,]`:      "malformed JSON",
		`{"a":1} x`: "request body must hold one JSON value",
	} {
		_, err := decode(body)
		var apiErr *Error
		require.ErrorAs(t, err, &apiErr, body)
		require.Contains(t, apiErr.Message, msg, "body %q", body)
	}
}
