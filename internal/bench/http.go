package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// httpIntake is ModeHTTP's side of the API: the node's real handler served on
// a loopback listener, and the request bodies the clients post to it.
type httpIntake struct {
	*loopbackAPI
	// bodies[i] is the JSON array of the i-th InsertSize chunk of the
	// workload.
	bodies [][]byte
}

// newHTTPIntake serves handler on 127.0.0.1 and encodes the workload into
// request bodies of perRequest batches each, refusing a body the API would
// refuse for its size. The clients' key (service:*) is set afterwards.
func newHTTPIntake(handler http.Handler, batches []store.NewBatch, perRequest, clients int, maxBody int64) (*httpIntake, error) {
	h := &httpIntake{}
	for i := 0; i < len(batches); i += perRequest {
		chunk := batches[i:min(i+perRequest, len(batches))]
		in := make([]apigen.NewBatch, len(chunk))
		for j, nb := range chunk {
			in[j] = apigen.NewBatch{ID: nb.ID, ServiceID: nb.ServiceID, Payload: base64.StdEncoding.EncodeToString(nb.Payload)}
		}
		body, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding request %d: %w", len(h.bodies), err)
		}
		if int64(len(body)) > maxBody {
			return nil, fmt.Errorf("--insert-size %d: a request body of %d bytes is over the API's limit of %d", perRequest, len(body), maxBody)
		}
		h.bodies = append(h.bodies, body)
	}
	api, err := serveLoopback(handler, clients, "")
	if err != nil {
		return nil, err
	}
	h.loopbackAPI = api
	return h, nil
}

// post sends the i-th body and succeeds when the API stored it (201; 200 when
// every batch was stored before).
func (h *httpIntake) post(ctx context.Context, i int) error {
	return h.loopbackAPI.post(ctx, "/v1/batches", h.bodies[i], nil, http.StatusCreated, http.StatusOK)
}
