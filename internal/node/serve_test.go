package node_test

// The API's connections through Serve, with a real TCP client: every phase of
// a connection has a deadline, and the connections are capped, so a client
// cannot hold the server's resources for free.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// serveAPI runs Serve with the API only (no loops) on a free port, with the
// API settings mutate gives, and returns its address.
func serveAPI(t *testing.T, mutate func(*node.APIConfig)) string {
	t.Helper()
	db := testdb.New(t)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.Queuer, cfg.Loops.Submitter, cfg.Loops.Monitor = false, false, false
	cfg.API.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = time.Second
	// The listener's behaviour, not the access model (tested in httpapi).
	cfg.API.Access.Open = true
	mutate(&cfg.API)
	n, err := node.Open(t.Context(), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, func(addr string) { addrc <- addr }) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		n.Close()
	})
	select {
	case addr := <-addrc:
		return addr
	case err := <-done:
		t.Fatalf("Serve returned before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not listen")
	}
	return ""
}

// client is one raw TCP connection to the API.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &client{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *client) send(s string) {
	c.t.Helper()
	_, err := io.WriteString(c.conn, s)
	require.NoError(c.t, err)
}

// get sends GET path on the connection, kept alive.
func (c *client) get(path string) {
	c.t.Helper()
	c.send("GET " + path + " HTTP/1.1\r\nHost: ledgerq\r\n\r\n")
}

// response reads one response, waiting at most wait.
func (c *client) response(wait time.Duration) (*http.Response, string, error) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(wait)))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// closed waits at most wait for the server to close the connection and
// reports whether it did.
func (c *client) closed(wait time.Duration) bool {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(wait)))
	_, err := c.r.ReadByte()
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// startPost sends the headers of a POST whose body of n bytes is yet to come:
// the connection is then busy, its handler reading the body.
func (c *client) startPost(n int) {
	c.t.Helper()
	c.send(fmt.Sprintf("POST /v1/batches HTTP/1.1\r\nHost: ledgerq\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", n))
}

func TestServe_ABodyTrickledSlowerThanTheReadTimeoutIsCutOffWith408(t *testing.T) {
	t.Parallel()
	addr := serveAPI(t, func(c *node.APIConfig) { c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second })
	c := dial(t, addr)
	// 200 bytes at one byte per 100ms would take 20s.
	c.startPost(200)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	began := time.Now()
	resp, body, err := c.response(8 * time.Second)
	require.NoError(t, err, "no answer %s after the request began, with a 1s read timeout", time.Since(began))
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
	require.Contains(t, body, `"success":false`)
	require.True(t, c.closed(5*time.Second), "the connection stays open after the body was cut off")
	require.Less(t, time.Since(began), 6*time.Second)
}

func TestServe_AnIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout(t *testing.T) {
	t.Parallel()
	addr := serveAPI(t, func(c *node.APIConfig) { c.IdleTimeout = time.Second })
	c := dial(t, addr)
	c.get("/healthz")
	resp, body, err := c.response(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.False(t, resp.Close, "the server did not keep the connection alive")
	began := time.Now()
	require.True(t, c.closed(8*time.Second), "an idle connection is still open %s after its last response, with a 1s idle timeout", time.Since(began))
}

func TestServe_BeyondMaxConnectionsANewConnectionWaitsForABusyOneToEnd(t *testing.T) {
	t.Parallel()
	addr := serveAPI(t, func(c *node.APIConfig) { c.MaxConnections = 2 })
	busy := []*client{dial(t, addr), dial(t, addr)}
	for _, c := range busy {
		c.startPost(100)
	}
	// The kernel's accept queue is first in, first out: the busy two are
	// accepted before the third.
	third := dial(t, addr)
	third.get("/healthz")
	_, _, err := third.response(time.Second)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a third connection was served beside two busy ones, with at most 2")

	require.NoError(t, busy[0].conn.Close())
	resp, body, err := third.response(10 * time.Second)
	require.NoError(t, err, "the waiting connection was not served once a busy one ended")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

func TestServe_AtMaxConnectionsANewConnectionClosesAnIdleOne(t *testing.T) {
	t.Parallel()
	addr := serveAPI(t, func(c *node.APIConfig) { c.MaxConnections = 2 })
	idle := []*client{dial(t, addr), dial(t, addr)}
	for _, c := range idle {
		c.get("/healthz")
		resp, _, err := c.response(10 * time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	third := dial(t, addr)
	third.get("/healthz")
	resp, body, err := third.response(10 * time.Second)
	require.NoError(t, err, "a new connection waited for idle keep-alive connections")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	closed := 0
	for _, c := range idle {
		if c.closed(time.Second) {
			closed++
		}
	}
	require.Equal(t, 1, closed, "the server should have closed one idle connection to serve the new one")
}

// The cap is on connections, not requests: a connection that sends request
// after request keeps its slot.
func TestServe_AKeptAliveConnectionServesRequestAfterRequestAtTheCap(t *testing.T) {
	t.Parallel()
	addr := serveAPI(t, func(c *node.APIConfig) { c.MaxConnections = 1 })
	c := dial(t, addr)
	for i := range 5 {
		c.get("/healthz")
		resp, body, err := c.response(10 * time.Second)
		require.NoError(t, err, "request %d", i)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.False(t, strings.EqualFold(resp.Header.Get("Connection"), "close"))
	}
}
