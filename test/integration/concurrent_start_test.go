package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// Issue 8, defect 6: serve processes started together on an empty database
// all migrate it and come up; their migrations serialise (README), the
// creation of the schema included.
//
// Two things make unserialised creations overlap for certain rather than by
// chance: the processes reach the database through a proxy that holds each
// CREATE SCHEMA until every process has sent one (or a moment has passed),
// and an event trigger (which needs a superuser, as the local cluster and
// the container have) keeps each CREATE SCHEMA from committing for a
// quarter of a second after it inserted the schema's row.
func TestServe_ConcurrentStartOfThreeProcessesOnAnEmptyDatabaseBringsAllUp(t *testing.T) {
	t.Parallel()
	const processes = 3
	u := testdb.NewEmpty(t)
	ctx := ctxT(t, 2*time.Minute)
	slowSchemaCreation(t, u)
	gated := newSchemaGate(t, u, processes, 2*time.Second)
	testproc.Binary(t) // built before the first start, so that they start together
	procs := make([]*testproc.Proc, processes)
	addrs := make([]string, processes)
	for i := range processes {
		addrs[i] = testproc.FreeAddr(t)
	}
	for i := range processes {
		procs[i] = testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + gated}, "serve", "--api-addr", addrs[i])
	}
	for i, p := range procs {
		testproc.WaitHTTP(t, p, "http://"+addrs[i]+"/readyz", http.StatusOK, time.Minute)
	}

	st, err := store.Open(ctx, u)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.NewMigrator(nil)
	require.NoError(t, err)
	defer m.Close()
	current, latest, err := m.Versions(ctx)
	require.NoError(t, err)
	require.Equal(t, latest, current, "the schema is at the binary's latest version")

	for _, p := range procs {
		p.Signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		require.Equal(t, 0, p.Wait(t, 30*time.Second), "serve exits 0 on SIGTERM: %s", p.Stderr)
	}
}

// slowSchemaCreation makes every CREATE SCHEMA in the database at dbURL
// wait a quarter of a second after it has created the schema, before its
// transaction may commit.
func slowSchemaCreation(t *testing.T, dbURL string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		CREATE FUNCTION public.slow_create_schema() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.25); END $$;
		CREATE EVENT TRIGGER slow_create_schema ON ddl_command_end WHEN TAG IN ('CREATE SCHEMA')
		EXECUTE FUNCTION public.slow_create_schema();`)
	require.NoError(t, err, "creating the event trigger (a superuser's right)")
}

// schemaGate is a TCP proxy to a PostgreSQL server that reads the frontend
// protocol and holds the first statements that contain CREATE SCHEMA until
// n of them are held, or until wait has passed since the first; from then
// on it forwards everything as it comes. It needs a connection without TLS.
type schemaGate struct {
	n      int
	wait   time.Duration
	target string // the server's host:port

	mu      sync.Mutex
	held    int
	open    chan struct{}
	opening sync.Once
}

// newSchemaGate starts a gate in front of dbURL's server and returns the URL
// that goes through it.
func newSchemaGate(t *testing.T, dbURL string, n int, wait time.Duration) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	g := &schemaGate{n: n, wait: wait, target: u.Host, open: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		g.release()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { g.serve(c) })
		}
	}()
	q := u.Query()
	q.Set("sslmode", "disable") // the gate reads the protocol
	u.RawQuery = q.Encode()
	u.Host = ln.Addr().String()
	return u.String()
}

func (g *schemaGate) release() { g.opening.Do(func() { close(g.open) }) }

// hold blocks a CREATE SCHEMA until the gate opens.
func (g *schemaGate) hold() {
	g.mu.Lock()
	g.held++
	if g.held == 1 {
		time.AfterFunc(g.wait, g.release)
	}
	if g.held == g.n {
		g.release()
	}
	g.mu.Unlock()
	<-g.open
}

func (g *schemaGate) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(client, server)
		client.Close()
	}()
	r := bufio.NewReader(client)
	// Startup: untyped messages (length, then a code) until the startup
	// message itself, protocol 3.0.
	for {
		msg, err := readMessage(r, false)
		if err != nil {
			return
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if binary.BigEndian.Uint32(msg[4:8]) == 3<<16 {
			break
		}
	}
	// Then typed messages: a simple query (Q) or a Parse (P) carries a
	// statement's text.
	for {
		msg, err := readMessage(r, true)
		if err != nil {
			return
		}
		if (msg[0] == 'Q' || msg[0] == 'P') && bytes.Contains(msg, []byte("CREATE SCHEMA")) {
			g.hold()
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// readMessage reads one frontend message, with its type byte when typed.
func readMessage(r *bufio.Reader, typed bool) ([]byte, error) {
	var head []byte
	if typed {
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		head = append(head, b)
	}
	var length [4]byte
	if _, err := io.ReadFull(r, length[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(length[:])
	if n < 4 || n > 1<<30 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, len(head)+int(n))
	copy(msg, head)
	copy(msg[len(head):], length[:])
	if _, err := io.ReadFull(r, msg[len(head)+4:]); err != nil {
		return nil, err
	}
	return msg, nil
}
