package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
)

func TestAPI_PostBatchStoresItAndGetReturnsIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload := signedBatch(t)
	resp := f.post("/v1/batches", batchBody(t, id, "svc", payload, `,"created_at":"2026-01-01T00:00:00Z"`))
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)

	got := f.get("/v1/batches/" + id)
	require.Equal(t, http.StatusOK, got.StatusCode)
	var out struct {
		Success bool
		Batch   struct {
			ID        string    `json:"id"`
			ServiceID string    `json:"service_id"`
			State     string    `json:"state"`
			CreatedAt time.Time `json:"created_at"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(got.Body), &out))
	require.True(t, out.Success)
	require.Equal(t, id, out.Batch.ID)
	require.Equal(t, "svc", out.Batch.ServiceID)
	require.Equal(t, "queued", out.Batch.State, "a batch posted to an idle service is queued as it is stored")
	require.True(t, out.Batch.CreatedAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))

	missing := f.get("/v1/batches/nope")
	require.Equal(t, http.StatusNotFound, missing.StatusCode)
	require.Contains(t, missing.Body, `"success":false`)
}

func TestAPI_RepostingTheSameBatchIsIdempotentAndDifferentContentConflicts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload, body := f.postNewBatch()
	again := f.post("/v1/batches", body)
	require.Equal(t, http.StatusOK, again.StatusCode, again.Body)
	require.Contains(t, again.Body, `"created":false`)

	other := f.post("/v1/batches", batchBody(t, id, "other-svc", payload, ""))
	require.Equal(t, http.StatusConflict, other.StatusCode, other.Body)
	require.Contains(t, other.Body, "service_id")

	// A conflict anywhere in an array stores nothing of the array.
	id2, payload2 := signedBatch(t)
	arr := "[" + string(batchBody(t, id2, "svc", payload2, "")) + "," + string(batchBody(t, id, "svc", payload, `,"created_at":"2020-01-01T00:00:00Z"`)) + "]"
	resp := f.post("/v1/batches", []byte(arr))
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Equal(t, 1, f.count())
}

func TestAPI_BadInputGetsA4xxWithAMessageAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload := signedBatch(t)
	otherID, _ := signedBatch(t)
	big := make([]byte, 5000)
	many := make([]string, 6)
	for i := range many {
		bid, bp := signedBatch(t)
		many[i] = string(batchBody(t, bid, "svc", bp, ""))
	}
	for _, tc := range []struct {
		name, body string
		status     int
		message    string
	}{
		{"malformed JSON", `{"id":`, 400, "malformed JSON"},
		{"not an object", `"hello"`, 400, "batch object or an array"},
		{"wrong type", `{"id":5,"service_id":"s","payload":"AA=="}`, 400, "field id: must be a string"},
		{"empty service_id", string(batchBody(t, id, "", payload, "")), 400, "field service_id: required"},
		{"missing payload", fmt.Sprintf(`{"id":%q,"service_id":"s"}`, id), 400, "field payload: required"},
		{"payload not base64", fmt.Sprintf(`{"id":%q,"service_id":"s","payload":"%%%%"}`, id), 400, "not valid base64"},
		{"payload not a batch", string(batchBody(t, id, "s", []byte("not protobuf at all"), "")), 400, "field payload"},
		{"header_signature is not the id", string(batchBody(t, otherID, "s", payload, "")), 400, "not the batch id"},
		{"payload over the limit", string(batchBody(t, id, "s", big, "")), 413, "larger than 4096 bytes"},
		{"unknown field", string(batchBody(t, id, "s", payload, `,"colour":"red"`)), 400, `unknown field \"colour\"`},
		{"bad created_at", string(batchBody(t, id, "s", payload, `,"created_at":"yesterday"`)), 400, "created_at"},
		{"empty array", `[]`, 400, "no batches"},
		{"array over the limit", "[" + strings.Join(many, ",") + "]", 413, "at most 5 per request"},
		{"one bad item in an array", "[" + many[0] + `,{"id":"x"}]`, 400, "batches[1]: field service_id: required"},
		{"same id twice in an array", "[" + many[0] + "," + many[0] + "]", 400, "repeats batches[0]"},
		{"two JSON values", string(batchBody(t, id, "s", payload, "")) + "{}", 400, "one JSON value"},
	} {
		resp := f.post("/v1/batches", []byte(tc.body))
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, resp.Body)
		require.Contains(t, resp.Body, `"success":false`, tc.name)
		require.Contains(t, resp.Body, tc.message, tc.name)
	}
	require.Equal(t, 0, f.count(), "nothing stored")
}

func TestAPI_OversizedBodyIs413(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1024 })
	resp := f.post("/v1/batches", []byte(`{"id":"`+strings.Repeat("a", 2000)+`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "larger than 1024 bytes")
}

func TestAPI_ListBatchesFiltersAndPagesByKeyset(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ids []string
	for range 5 {
		id, payload := signedBatch(t)
		ids = append(ids, id)
		require.Equal(t, http.StatusCreated, f.post("/v1/batches", batchBody(t, id, "a", payload, "")).StatusCode)
	}
	id, payload := signedBatch(t)
	require.Equal(t, http.StatusCreated, f.post("/v1/batches", batchBody(t, id, "b", payload, "")).StatusCode)

	type page struct {
		Batches []struct {
			ID string `json:"id"`
		}
		NextAfter string `json:"next_after"`
	}
	var seen []string
	after := ""
	for range 10 {
		resp := f.get("/v1/batches?service_id=a&limit=2&after=" + after)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var p page
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &p))
		for _, b := range p.Batches {
			seen = append(seen, b.ID)
		}
		if p.NextAfter == "" {
			break
		}
		after = p.NextAfter
	}
	require.Equal(t, slices.Sorted(slices.Values(ids)), seen)

	resp := f.get("/v1/batches?status=committed")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Body, `"batches":[]`)
	for q, msg := range map[string]string{
		"status=done": "unknown batch status", "limit=0": "limit", "limit=x": "limit", "colour=red": "unknown query parameter",
	} {
		resp := f.get("/v1/batches?" + q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Contains(t, resp.Body, msg, q)
	}
}
