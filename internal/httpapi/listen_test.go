package httpapi_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
)

// serveHandler serves h the way Serve serves the API, with a 1s write
// timeout, and returns its address.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	cfg := httpapi.DefaultConfig()
	cfg.Addr, cfg.WriteTimeout = "127.0.0.1:0", time.Second
	srv, ln, err := cfg.Listen(h, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// sendGET dials addr and sends a GET of path on the connection, which it
// returns; the connection is closed at the end of the test.
func sendGET(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: ledgerq\r\n\r\n")
	require.NoError(t, err)
	return conn
}

func TestListen_AResponseTheClientDoesNotReadIsCutOffByTheWriteTimeout(t *testing.T) {
	t.Parallel()
	result := make(chan error, 1)
	addr := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB, far more than the sockets buffer
			if _, err := w.Write(chunk); err != nil {
				result <- err
				return
			}
		}
		result <- nil
	}))
	sendGET(t, addr, "/big")
	// The client reads nothing.
	select {
	case err := <-result:
		require.Error(t, err, "64 MiB were written to a client that reads nothing")
	case <-time.After(15 * time.Second):
		t.Fatal("the handler still writes to a client that reads nothing, 15s on, with a 1s write timeout")
	}
}

// The write timeout counts from the response's first byte, so a handler that
// waits longer before answering (a long-poll) still answers.
func TestListen_AHandlerThatWaitsLongerThanTheWriteTimeoutStillAnswers(t *testing.T) {
	t.Parallel()
	addr := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(1500 * time.Millisecond): // the long-poll's wait
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "done")
	}))
	conn := sendGET(t, addr, "/wait")
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "done", string(body))
}

// A handler's own write deadline (a stream's) is kept: the first write does
// not replace it with WriteTimeout.
func TestListen_AHandlersOwnWriteDeadlineIsKept(t *testing.T) {
	t.Parallel()
	result := make(chan error, 1)
	addr := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
			result <- err
			return
		}
		_, err := io.WriteString(w, "late")
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		result <- err
	}))
	sendGET(t, addr, "/stream")
	select {
	case err := <-result:
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the handler's past deadline was replaced")
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not finish")
	}
}
