package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// loopbackAPI is a node's real handler served on a 127.0.0.1 listener, and
// the HTTP client the bench's clients post to it with: the API's whole
// cost (HTTP, JSON, checks) is paid, as a client's request pays it.
type loopbackAPI struct {
	srv    *http.Server
	url    string
	client *http.Client
	// key is the API key the clients send.
	key      string
	requests atomic.Int64
}

// serveLoopback serves handler on 127.0.0.1, for clients sending at once,
// each with a kept-alive connection of its own, as clients with their own
// connection pools would hold.
func serveLoopback(handler http.Handler, clients int, key string) (*loopbackAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the API: %w", err)
	}
	a := &loopbackAPI{url: "http://" + ln.Addr().String(), key: key}
	a.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }() // ends with ErrServerClosed on close
	a.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, IdleConnTimeout: time.Minute,
	}}
	return a, nil
}

// post sends a JSON body to path with the key (and header's other fields)
// and succeeds on one of the ok statuses. It reads the answer as a client
// would, so the connection is reused.
func (a *loopbackAPI) post(ctx context.Context, path string, body []byte, header http.Header, ok ...int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	a.requests.Add(1)
	if err != nil {
		return fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if !slices.Contains(ok, resp.StatusCode) {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(answer[:min(len(answer), 512)]))
	}
	return nil
}

func (a *loopbackAPI) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	a.client.CloseIdleConnections()
}
