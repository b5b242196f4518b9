package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// The tests of this file each reproduce one input defect of the batch API
// (issue 8) through the real handler.

// requireCreatedAtRefused posts a new batch with each created_at in ats and
// requires a 400 that names the field and says each of more; none is stored.
func (f *apiFixture) requireCreatedAtRefused(ats []string, more ...string) {
	f.t.Helper()
	for _, at := range ats {
		id, payload := signedBatch(f.t)
		resp := f.post("/v1/batches", batchBody(f.t, id, "svc", payload, `,"created_at":"`+at+`"`))
		require.Equal(f.t, http.StatusBadRequest, resp.StatusCode, "%s: %s", at, resp.Body)
		require.Contains(f.t, resp.Body, "field created_at", at)
		for _, m := range more {
			require.Contains(f.t, resp.Body, m, at)
		}
	}
	require.Equal(f.t, 0, f.count(), "nothing stored")
}

func TestPostBatches_CreatedAtOutsideYears0To9999Is400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// In UTC these are 10000-01-01T23:58:59Z and -0001-12-31T23:00:00Z:
	// PostgreSQL stores them, but no RFC 3339 text can say them.
	f.requireCreatedAtRefused([]string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+01:00", "10000-01-01T00:00:00Z"})

	// The edges of the range are accepted and read back as they were given.
	for _, at := range []string{"0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59+00:00"} {
		id, payload := signedBatch(t)
		resp := f.post("/v1/batches", batchBody(t, id, "svc-"+at, payload, `,"created_at":"`+at+`"`))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", at, resp.Body)
		want, err := time.Parse(time.RFC3339Nano, at)
		require.NoError(t, err)
		require.Contains(t, f.get("/v1/batches/"+id).Body, `"created_at":"`+want.UTC().Format(time.RFC3339Nano)+`"`)
	}
}

// A row written by SQL with times Go's time.Time.MarshalJSON refuses (years
// outside 0–9999) still reads: the API formats times itself, in ISO 8601's
// expanded form for such years, since RFC 3339 cannot say them.
func TestGetBatches_StoredTimeOutsideYears0To9999StillAnswers200(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, _, body := f.postNewBatch()
	// Every time column out of range; committed, so that all of them are set.
	f.exec(`UPDATE ledgerq.batches SET status = 'committed', submitted = true, attempts = 1, queued_at = NULL,
		created_at = '10000-01-01 00:00:00+00', received_at = '10000-01-02 00:00:00+00',
		last_submitted_at = '10000-01-03 00:00:00+00', finished_at = '10000-01-04 00:00:00+00',
		updated_at = '0002-06-01 12:00:00.5+00 BC' WHERE seq = (SELECT seq FROM ledgerq.batch_payloads WHERE id = $1)`, id)

	for _, resp := range []httpResult{
		f.getRaw("/v1/batches/" + id),
		f.getRaw("/v1/batches"),
		f.getRaw("/v1/batches?service_id=svc"),
		f.postRaw("/v1/batches", body),
	} {
		require.Less(t, resp.StatusCode, 300, resp.Body)
		require.True(t, json.Valid([]byte(resp.Body)), resp.Body)
		require.Contains(t, resp.Body, `"created_at":"+10000-01-01T00:00:00Z"`)
		require.Contains(t, resp.Body, `"updated_at":"-0001-06-01T12:00:00.5Z"`)
	}

	// Every time field of the generated Batch is written by the API, not by
	// time.Time.MarshalJSON: a time field added to the document must be
	// shadowed in batchJSON too.
	var out struct {
		Batch map[string]any `json:"batch"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.getRaw("/v1/batches/"+id).Body), &out))
	bt := reflect.TypeFor[apigen.Batch]()
	for i := range bt.NumField() {
		field := bt.Field(i)
		if field.Type != reflect.TypeFor[time.Time]() && field.Type != reflect.TypeFor[*time.Time]() {
			continue
		}
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "queued_at" {
			continue // NULL: a committed batch is not queued
		}
		v, _ := out.Batch[name].(string)
		require.Regexp(t, `^[+-]`, v, "%s is not written in the expanded form", name)
	}
}

// exec runs one SQL statement on the fixture's database.
func (f *apiFixture) exec(sql string, args ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := f.db.Store.Conns().Exec(ctx, sql, args...)
	require.NoError(f.t, err)
}

// getRaw and postRaw send a request without checking the answer against the
// document: for answers the document cannot describe (times outside RFC
// 3339's years) and for paths that are not in it.
func (f *apiFixture) getRaw(path string) httpResult {
	f.t.Helper()
	return sendRaw(f.t, f.getRequest(path))
}

func (f *apiFixture) postRaw(path string, body []byte) httpResult {
	f.t.Helper()
	return sendRaw(f.t, f.postRequest(path, body))
}

func sendRaw(t *testing.T, req *http.Request) httpResult {
	t.Helper()
	resp, body := roundTrip(t, req)
	return httpResult{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

// PostgreSQL text holds neither NUL nor invalid UTF-8 (SQLSTATE 22021); such
// a path or query parameter is refused before the database is asked.
func TestBatches_NULOrInvalidUTF8InPathOrQueryIs400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.requireGets400(map[string]string{
		"/v1/batches/%FF":                "path parameter id: not valid UTF-8",
		"/v1/batches/a%00b":              "path parameter id: holds a NUL",
		"/v1/batches/%ED%A0%80":          "path parameter id: not valid UTF-8", // a UTF-16 surrogate written as UTF-8
		"/v1/batches?service_id=%00":     "query parameter service_id: holds a NUL",
		"/v1/batches?service_id=a%FFb":   "query parameter service_id: not valid UTF-8",
		"/v1/batches?after=%00":          "query parameter after: holds a NUL",
		"/v1/batches?after=%C3":          "query parameter after: not valid UTF-8",
		"/v1/batches?limit=1&after=x%00": "query parameter after: holds a NUL",
	})
}

func TestPostBatches_NULInIDOrServiceIDIs400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload := signedBatch(t)
	for _, tc := range []struct{ body, msg string }{
		{strings.Replace(string(batchBody(t, id, "svc", payload, "")), `"svc"`, `"svc\u0000"`, 1), "field service_id: holds a NUL"},
		{strings.Replace(string(batchBody(t, id, "svc", payload, "")), id, id+`\u0000`, 1), "field id: holds a NUL"},
		{"[" + string(batchBody(t, id, "svc", payload, "")) + `,{"id":"x","service_id":"\u0000","payload":"AA=="}]`, "batches[1]: field service_id: holds a NUL"},
	} {
		resp := f.post("/v1/batches", []byte(tc.body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.body, resp.Body)
		require.Contains(t, resp.Body, tc.msg, tc.body)
	}
	require.Equal(t, 0, f.count(), "nothing stored")
}

// encoding/json turns invalid UTF-8 and lone UTF-16 surrogate escapes into
// U+FFFD, so that "svc\xff" and "svc\xfe" would be one service. The body is
// refused instead.
func TestPostBatches_InvalidUTF8BodyIs400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, service := range []string{"svc\xff", "svc\xfe", `svc\ud800`, `svc\udc00x`, `svc\ud800\u0041`, `svc\\\ud800`} {
		id, payload := signedBatch(t)
		body := strings.Replace(string(batchBody(t, id, "SERVICE", payload, "")), "SERVICE", service, 1)
		resp := f.post("/v1/batches", []byte(body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q: %s", service, resp.Body)
		require.Contains(t, resp.Body, "UTF", service)
	}
	require.Equal(t, 0, f.count(), "nothing stored")

	// An escaped pair is one character, and an escaped backslash before "u"
	// is no escape at all.
	for service, stored := range map[string]string{`svc\ud83d\ude00`: "svc😀", `svc\\ud800`: `svc\\ud800`, "svc\u00e9": "svcé"} {
		id, payload := signedBatch(t)
		body := strings.Replace(string(batchBody(t, id, "SERVICE", payload, "")), "SERVICE", service, 1)
		resp := f.post("/v1/batches", []byte(body))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%q: %s", service, resp.Body)
		require.Contains(t, f.get("/v1/batches/"+id).Body, `"service_id":"`+stored+`"`, service)
	}
}

// TestBatchesAPI_HostileInputNeverAnswers5xx sends paths, query strings and
// bodies made of pieces that have broken the API before, mixed at random
// from a fixed seed: no answer may be a 5xx, and every refusal is the API's
// JSON error.
func TestBatchesAPI_HostileInputNeverAnswers5xx(t *testing.T) {
	t.Parallel()
	h := hostileHandler(t)
	r := rand.New(rand.NewPCG(8, 1))
	batches := signedBatches(t, 6)
	for range 600 {
		method, target, body := hostileRequest(r, batches)
		require.True(t, checkHostile(t, h, method, target, body), "%s %.300q", method, target)
	}
}

// FuzzBatchesAPI is TestBatchesAPI_HostileInputNeverAnswers5xx for go test
// -fuzz, seeded with the same kind of requests. Every fuzz worker process
// starts its own PostgreSQL (testdb), so -parallel 1 suits a small machine.
func FuzzBatchesAPI(f *testing.F) {
	h := hostileHandler(f)
	r := rand.New(rand.NewPCG(8, 2))
	batches := signedBatches(f, 3)
	for range 40 {
		method, target, body := hostileRequest(r, batches)
		f.Add(method, target, body)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		if !checkHostile(t, h, method, target, body) {
			t.Skip("not a request a client could send")
		}
	})
}

// hostileHandler is the API as setup serves it, over a fresh database, for
// requests in the test's process.
func hostileHandler(tb testing.TB) http.Handler {
	tb.Helper()
	db := testdb.New(tb)
	cfg := httpapi.DefaultConfig()
	cfg.MaxBatchesPerRequest = 5
	cfg.MaxPayloadBytes = 4096
	cfg.MaxBodyBytes = 256 << 10
	return httpapi.New(cfg, httpapi.Deps{Store: db.Store, Clock: clock.NewFake(t0), Logger: testLogger(tb), Metrics: metrics.New()}).Handler()
}

// checkHostile sends one request; it reports false when the request is
// not one a client could send.
func checkHostile(t *testing.T, h http.Handler, method, target string, body []byte) bool {
	t.Helper()
	req, err := http.NewRequest(method, "http://ledgerq.test"+target, bytes.NewReader(body))
	if err != nil || !strings.HasPrefix(target, "/") {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(target, "/batches") {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	path, _, _ := strings.Cut(target, "?")
	requireNoFaultAnswer(t, h, req, path == "/batches" || path == "/batch_statuses", fmt.Sprintf("%.300s %.300q with %.300q", method, target, body))
	return true
}

// requireNoFaultAnswer serves req: no answer may be a 5xx, and every refusal
// is the API's JSON error, or Sawtooth's error object on Sawtooth's routes.
// what names the request in failure messages.
func requireNoFaultAnswer(t *testing.T, h http.Handler, req *http.Request, sawtoothRoute bool, what string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Less(t, rec.Code, 500, "%s: %.300s", what, rec.Body)
	if rec.Code >= 400 {
		require.True(t, json.Valid(rec.Body.Bytes()), "%s: %.300s", what, rec.Body)
		want := `"success":false`
		if sawtoothRoute {
			want = `{"error":{"code":`
		}
		require.Contains(t, rec.Body.String(), want, what)
	}
}

type signed struct{ id, payload string }

func signedBatches(tb testing.TB, n int) []signed {
	out := make([]signed, n)
	for i := range out {
		id, payload := signedBatch(tb)
		out[i] = signed{id, base64.StdEncoding.EncodeToString(payload)}
	}
	return out
}

// hostileText is text that has reached the database or been misread: NUL,
// invalid UTF-8, a UTF-16 surrogate written as UTF-8, multi-byte characters
// over the length limit, and text with meaning elsewhere.
var hostileText = []string{
	"", "svc", "\x00", "a\x00b", "\xff", "a\xc3", "\xed\xa0\x80", "\xc0\x80", "€",
	strings.Repeat("€", 256), strings.Repeat("€", 257), strings.Repeat("a", 257), strings.Repeat("a", 5000),
	"'; DROP TABLE ledgerq.batches; --", `\`, `"`, "%", "+", " ", "\n", "😀", "../..", "*",
}

// hostileJSONString is a JSON string literal, sometimes with escapes that
// have broken the API: \u0000 and lone surrogates.
func hostileJSONString(r *rand.Rand, s string) string {
	switch r.IntN(6) {
	case 0:
		return `"` + s + []string{`\u0000`, `\ud800`, `\udc00\ud800`, `\ud83d\ude00`, `\\ud800`, `\u00ff`}[r.IntN(6)] + `"`
	case 1:
		return `"` + s + `"` // raw: control characters and quotes unescaped
	}
	quoted, _ := json.Marshal(s) // encoding/json writes invalid UTF-8 as U+FFFD
	if r.IntN(2) == 0 {
		return strconv.Quote(s) // Go's escapes: \x00 is no JSON
	}
	return string(quoted)
}

var hostileTimes = []string{
	"2026-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+01:00", "0000-01-01T00:00:00Z",
	"0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00.0000001Z", "10000-01-01T00:00:00Z",
	"-0001-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.123456789Z",
	"2026-01-01T00:00:00+24:00", "2026-01-01", "",
}

func hostileRequest(r *rand.Rand, batches []signed) (method, target string, body []byte) {
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	b := batches[r.IntN(len(batches))]
	text := func() string {
		if r.IntN(4) == 0 {
			return b.id
		}
		return pick(hostileText)
	}
	esc := func(s string) string {
		if r.IntN(2) == 0 {
			return url.PathEscape(s)
		}
		var sb strings.Builder
		for _, c := range []byte(s) {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
		return sb.String()
	}

	method = http.MethodGet
	switch n := r.IntN(13); n {
	case 10, 11:
		// The Sawtooth ingress: a BatchList (or bytes that are not one)
		// under a hostile service id.
		target = "/batches"
		if r.IntN(2) == 0 {
			target += "?service_id=" + esc(text())
		}
		raw, _ := base64.StdEncoding.DecodeString(b.payload)
		body = pick2(r, [][]byte{sawtooth.AppendBatchList(nil, raw), raw, []byte(text()), nil})
		return http.MethodPost, target, body
	case 12:
		// Statuses: never with a wait, which would hold the test.
		ids := esc(text())
		if r.IntN(2) == 0 {
			ids = b.id + "," + ids
		}
		return http.MethodGet, "/batch_statuses?id=" + ids + "&wait=" + pick([]string{"0", "false"}), nil
	case 0:
		target = "/v1/batches/" + esc(text())
	case 1:
		target = "/v1/batches/" + esc(text()) + "/" + esc(text())
	case 2:
		target = "/" + esc(text())
	case 3:
		method, target = pick([]string{http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodPost}), "/v1/batches/"+esc(text())
	case 4, 5:
		target = "/v1/batches"
	default:
		method, target = http.MethodPost, "/v1/batches"
	}
	if method == http.MethodGet && r.IntN(2) == 0 {
		var q []string
		for range 1 + r.IntN(3) {
			key := pick([]string{"service_id", "after", "limit", "status", "colour", "service_id", "after"})
			value := text()
			switch key {
			case "limit":
				value = pick([]string{"0", "-1", "1", "1000", "1001", "99999999999999999999", "1e3", " 1", text()})
			case "status":
				value = pick([]string{"committed", "pending", "None", text()})
			}
			q = append(q, esc(key)+"="+esc(value))
		}
		target += "?" + strings.Join(q, "&")
	}
	if method != http.MethodPost {
		return method, target, nil
	}

	object := func() string {
		fields := map[string]string{
			"id": `"` + b.id + `"`, "service_id": hostileJSONString(r, text()), "payload": `"` + b.payload + `"`,
		}
		switch r.IntN(8) {
		case 0:
			fields["id"] = hostileJSONString(r, text())
		case 1:
			fields["payload"] = hostileJSONString(r, text())
		case 2:
			fields[pick([]string{"ID", "Service_Id", "PAYLOAD", "colour"})] = `"x"`
		case 3:
			delete(fields, pick([]string{"id", "service_id", "payload"}))
		case 4:
			fields["id"] = pick([]string{"5", "null", "[]", "{}", "true", "1e999"})
		}
		if r.IntN(2) == 0 {
			fields["created_at"] = `"` + pick(hostileTimes) + `"`
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			parts = append(parts, `"`+k+`":`+fields[k])
		}
		if r.IntN(8) == 0 { // a key twice
			parts = append(parts, `"service_id":"svc"`)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	s := object()
	switch r.IntN(8) {
	case 0:
		items := []string{s}
		for range r.IntN(7) {
			items = append(items, object())
		}
		s = "[" + strings.Join(items, ",") + "]"
	case 1:
		s = strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	case 2:
		s = pick([]string{"", "null", "[]", "{}", `"x"`, "1e999", "[null]", "[1]", s + s, s + "\x00", "\xef\xbb\xbf" + s})
	case 3: // one byte changed, inserted or cut
		i := r.IntN(len(s))
		switch r.IntN(3) {
		case 0:
			s = s[:i] + string(rune(r.IntN(256))) + s[i+1:]
		case 1:
			s = s[:i] + string([]byte{byte(r.IntN(256))}) + s[i:]
		default:
			s = s[:i]
		}
	}
	return method, target, []byte(s)
}

// store.NewBatch takes a zero CreatedAt for "not given", and Go's zero time is
// 0001-01-01T00:00:00Z: given explicitly, it was stored as the time of
// receipt, and a re-post with it matched a batch stored with any created_at.
// It is refused instead (a user's explicit time is kept or refused, never
// replaced).
func TestPostBatches_CreatedAtOfGoZeroTimeIsRefusedNotTakenAsMissing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.requireCreatedAtRefused([]string{"0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00.0000009Z"}, "reserved")

	// A re-post with it is no match for a batch stored with another time.
	id, payload := signedBatch(t)
	require.Equal(t, http.StatusCreated, f.post("/v1/batches", batchBody(t, id, "svc", payload, `,"created_at":"2026-01-01T00:00:00Z"`)).StatusCode)
	resp := f.post("/v1/batches", batchBody(t, id, "svc", payload, `,"created_at":"0001-01-01T00:00:00Z"`))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)

	// Its neighbours are times like any other.
	for _, at := range []string{"0001-01-01T00:00:00.000001Z", "0000-12-31T23:59:59.999999Z"} {
		id, payload := signedBatch(t)
		resp := f.post("/v1/batches", batchBody(t, id, "svc-"+at, payload, `,"created_at":"`+at+`"`))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", at, resp.Body)
		require.Contains(t, f.get("/v1/batches/"+id).Body, `"created_at":"`+at+`"`)
	}
}

// Without a Content-Length, echo's body limit only shows as an error from
// the body's reader, which the JSON decoding took for bad JSON.
func TestPostBatches_ChunkedBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1024 })
	body := `{"id":"` + strings.Repeat("a", 2000) + `"}`
	// A reader of no known length, sent chunked.
	req, err := http.NewRequest(http.MethodPost, f.url+"/v1/batches", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.TransferEncoding = []string{"chunked"}
	f.authorize(req)
	resp := do(t, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "larger than 1024 bytes")
}

// The limit is the batches table's CHECK, length(service_id) <= 256, and
// PostgreSQL's length counts characters, not bytes ("€" is three).
func TestPostBatches_IDAndServiceIDLimitCountsCharactersNotBytes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, service := range []string{strings.Repeat("€", 100), strings.Repeat("€", 256), strings.Repeat("😀", 256)} {
		id, payload := signedBatch(t)
		resp := f.post("/v1/batches", batchBody(t, id, service, payload, ""))
		require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	}
	id, payload := signedBatch(t)
	resp := f.post("/v1/batches", batchBody(t, id, strings.Repeat("€", 257), payload, ""))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "field service_id: longer than 256 characters")

	resp = f.post("/v1/batches", batchBody(t, strings.Repeat("€", 257), "svc", payload, ""))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "field id: longer than 256 characters")
	// 100 characters are within the limit: this id is refused for not being
	// the batch's signature, not for its length.
	resp = f.post("/v1/batches", batchBody(t, strings.Repeat("€", 100), "svc", payload, ""))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.NotContains(t, resp.Body, "longer than")
}

// encoding/json matches field names without regard to case and lets the
// last of a repeated key win. A submission queue must not guess: names are
// exact, and each is given once.
func TestPostBatches_FieldNamesAreExactAndGivenOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload := signedBatch(t)
	good := string(batchBody(t, id, "svc", payload, ""))
	other, otherPayload := signedBatch(t)
	for _, tc := range []struct{ body, msg string }{
		{strings.Replace(good, `"id"`, `"ID"`, 1), `unknown field \"ID\" (field names are case-sensitive: did you mean \"id\"?)`},
		{strings.Replace(good, `"service_id"`, `"Service_Id"`, 1), `unknown field \"Service_Id\"`},
		{strings.Replace(good, `"payload"`, `"PAYLOAD"`, 1), `unknown field \"PAYLOAD\"`},
		{string(batchBody(t, id, "svc", payload, `,"Created_At":"2026-01-01T00:00:00Z"`)), `unknown field \"Created_At\"`},
		{string(batchBody(t, id, "svc", payload, `,"service_id":"other"`)), "field service_id: given more than once"},
		{string(batchBody(t, id, "svc", payload, `,"created_at":"2026-01-01T00:00:00Z","created_at":"2027-01-01T00:00:00Z"`)), "field created_at: given more than once"},
		{"[" + string(batchBody(t, other, "svc", otherPayload, "")) + "," + strings.Replace(good, `"id"`, `"Id"`, 1) + "]", `batches[1]: unknown field \"Id\"`},
		{"[" + string(batchBody(t, other, "svc", otherPayload, "")) + "," + string(batchBody(t, id, "svc", payload, `,"id":"x"`)) + "]", "batches[1]: field id: given more than once"},
	} {
		resp := f.post("/v1/batches", []byte(tc.body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.body, resp.Body)
		require.Contains(t, resp.Body, tc.msg, tc.body)
	}
	require.Equal(t, 0, f.count(), "nothing stored")
}

func pick2[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }
