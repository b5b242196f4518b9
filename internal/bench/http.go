package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// httpIntake is ModeHTTP's side of the API: the node's real handler served on
// a loopback listener, and the request bodies the clients post to it.
type httpIntake struct {
	srv    *http.Server
	url    string
	client *http.Client
	// key is the API key the clients send (service:*).
	key string
	// bodies[i] is the JSON array of the i-th InsertSize chunk of the
	// workload.
	bodies   [][]byte
	requests atomic.Int64
}

// newHTTPIntake serves handler on 127.0.0.1 and encodes the workload into
// request bodies of perRequest batches each, refusing a body the API would
// refuse for its size.
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the API: %w", err)
	}
	h.url = "http://" + ln.Addr().String()
	h.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }() // ends with ErrServerClosed on close
	// One kept-alive connection per client, as clients with their own
	// connection pools would hold.
	h.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, IdleConnTimeout: time.Minute,
	}}
	return h, nil
}

// post sends the i-th body and succeeds when the API stored it (201; 200 when
// every batch was stored before).
func (h *httpIntake) post(ctx context.Context, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/batches", bytes.NewReader(h.bodies[i]))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/batches: %w", err)
	}
	defer resp.Body.Close()
	// Read the answer as a client would, so the connection is reused.
	body, err := io.ReadAll(resp.Body)
	h.requests.Add(1)
	if err != nil {
		return fmt.Errorf("POST /v1/batches: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/batches: %s: %s", resp.Status, bytes.TrimSpace(body[:min(len(body), 512)]))
	}
	return nil
}

func (h *httpIntake) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	h.client.CloseIdleConnections()
}
