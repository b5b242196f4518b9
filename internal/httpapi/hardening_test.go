package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
)

// The tests of this file each reproduce one input defect of the batch API
// (issue 8) through the real handler.

func TestPostBatches_CreatedAtOutsideYears0To9999Is400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// In UTC these are 10000-01-01T23:58:59Z and -0001-12-31T23:00:00Z:
	// PostgreSQL stores them, but no RFC 3339 text can say them.
	for _, at := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+01:00", "10000-01-01T00:00:00Z"} {
		id, payload := signedBatch(t)
		resp := f.post("/v1/batches", batchBody(t, id, "svc", payload, `,"created_at":"`+at+`"`))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", at, resp.Body)
		require.Contains(t, resp.Body, "field created_at", at)
	}
	require.Equal(t, 0, f.count(), "nothing stored")

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
	id, payload := signedBatch(t)
	body := batchBody(t, id, "svc", payload, "")
	require.Equal(t, http.StatusCreated, f.post("/v1/batches", body).StatusCode)
	// Every time column out of range; committed, so that all of them are set.
	f.exec(`UPDATE ledgerq.batches SET status = 'committed', submitted = true, attempts = 1, queued_at = NULL,
		created_at = '10000-01-01 00:00:00+00', received_at = '10000-01-02 00:00:00+00',
		last_submitted_at = '10000-01-03 00:00:00+00', finished_at = '10000-01-04 00:00:00+00',
		updated_at = '0002-06-01 12:00:00.5+00 BC' WHERE id = $1`, id)

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
	_, err := f.db.Store.Pool().Exec(ctx, sql, args...)
	require.NoError(f.t, err)
}

// getRaw and postRaw send a request without checking the answer against the
// document: for answers the document cannot describe (times outside RFC
// 3339's years) and for paths that are not in it.
func (f *apiFixture) getRaw(path string) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
	require.NoError(f.t, err)
	return sendRaw(f.t, req)
}

func (f *apiFixture) postRaw(path string, body []byte) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	return sendRaw(f.t, req)
}

func sendRaw(t *testing.T, req *http.Request) httpResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(body)}
}
