package httpapi

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/tlsreload"
)

// The API's listener: every phase of a connection has a deadline and the
// connections are capped, so a client cannot hold the server's resources for
// free.

// Listen listens on c.Addr and builds the API's server for h. Every phase of
// a connection has a deadline and the connections are capped, so a client
// cannot hold the server's resources for free: headers within
// ReadHeaderTimeout, the whole request within ReadTimeout (408 past it, see
// httpapi), the response within WriteTimeout of its first byte, the next
// request within IdleTimeout, and at most MaxConnections at once. With
// TLSCertFile and TLSKeyFile it terminates TLS itself, with the pair loaded
// again when the files change (tlsreload).
func (c Config) Listen(h http.Handler, logger *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", c.Addr, err)
	}
	limited := newConnLimiter(ln, c.MaxConnections)
	// TLS wraps the limiter, not the other way round: the server must see
	// a *tls.Conn for a request to carry its TLS state (http.Request.TLS,
	// which decides, for one, whether the console's cookie is Secure).
	var served net.Listener = limited
	if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		r, err := tlsreload.New(tlsreload.Config{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile}, logger)
		if err != nil {
			_ = ln.Close()
			return nil, nil, err
		}
		served = tls.NewListener(limited, r.TLSConfig())
	}
	srv := &http.Server{
		Handler:           responseDeadline(h, c.WriteTimeout),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		// WriteTimeout stays zero: net/http counts it from the end of the
		// request's headers, so it would cut a long-poll that waits longer
		// (Sawtooth's GET /batch_statuses?wait=N). responseDeadline counts
		// from the response's first byte instead.
		IdleTimeout: c.IdleTimeout,
		ConnState:   limited.connState,
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return srv, served, nil
}

// responseDeadline gives each response d to be written, from its first byte:
// a client that stops reading cannot hold a handler and its connection
// beyond it. A handler that streams on purpose can move the deadline with
// http.ResponseController.SetWriteDeadline.
func responseDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, d: d}, r)
	})
}

type deadlineWriter struct {
	http.ResponseWriter
	d       time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		// net/http clears the deadline when the response is done, before
		// the connection waits for its next request.
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// SetWriteDeadline is what http.ResponseController calls: a handler's own
// deadline replaces the one the first write would set.
func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.started = true
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(t)
}

// Unwrap lets http.ResponseController (flush, hijack) reach the server's
// writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connLimiter is a listener that holds at most max connections open: what
// piles up under load or abuse is connections (a descriptor, a goroutine and
// buffers each, held by slow or idle clients before any request reaches a
// handler), and capping them caps concurrent requests too, as HTTP/1.1 serves
// one request per connection at a time. A connection accepted at the cap
// first closes the longest-idle keep-alive connection, so idle clients never
// lock out new ones; if none is idle it waits for a slot (closing the next
// connection that goes idle), and the clients behind it wait in the kernel's
// accept queue. netutil.LimitListener does the waiting but neither the
// closing of idle connections nor CloseWrite, which net/http needs to let a
// client read a 408 or 413 before the connection is reset.
type connLimiter struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	idle    map[net.Conn]time.Time // keep-alive connections waiting for a request, since when
	waiting bool                   // Accept holds a connection and waits for a slot
}

func newConnLimiter(ln net.Listener, maxConns int) *connLimiter {
	return &connLimiter{
		Listener: ln, slots: make(chan struct{}, maxConns), done: make(chan struct{}),
		idle: make(map[net.Conn]time.Time),
	}
}

// Accept accepts a connection and returns it once it has a slot.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.mu.Lock()
		oldest := l.oldestIdle()
		l.waiting = oldest == nil // else closing oldest frees the slot
		l.mu.Unlock()
		if oldest != nil {
			_ = oldest.Close()
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
		l.mu.Lock()
		l.waiting = false
		l.mu.Unlock()
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// oldestIdle removes the longest-idle connection from l.idle and returns it,
// or nil. l.mu is held.
func (l *connLimiter) oldestIdle() net.Conn {
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	return oldest
}

// connState is the server's ConnState hook: it tracks idle connections, and
// closes one that goes idle while a new connection waits for its slot.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateIdle:
		if l.waiting && len(l.slots) == cap(l.slots) {
			l.waiting = false // one connection per waiter
			_ = c.Close()
			return
		}
		l.idle[c] = time.Now()
	default:
		delete(l.idle, c)
	}
}

// Close stops Accept, including one waiting for a slot.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the connection, as net/http does before closing one
// whose request body it did not read, so that the client reads the response
// rather than a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
