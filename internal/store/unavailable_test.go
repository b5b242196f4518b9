package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// What a connection lost to a restart, a crash, a terminated backend or a
// network cut looks like through pgx, and what a primary demoted to a
// standby answers a write (25006: ledgerq never asks for a read-only
// transaction itself): the API answers these 503 (retry later), and
// everything else the database says is a refusal (4xx/500).
func TestIsUnavailable_ClassifiesLostConnectionsAndNotRefusals(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("getting batch: %w", err) }
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code} }
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"unexpected EOF":                     {wrap(io.ErrUnexpectedEOF), true},
		"EOF from a closed connection":       {wrap(io.EOF), true},
		"connection reset by peer":           {wrap(opErr("read", syscall.ECONNRESET)), true},
		"broken pipe":                        {wrap(opErr("write", syscall.EPIPE)), true},
		"connection refused":                 {wrap(opErr("dial", syscall.ECONNREFUSED)), true},
		"bare errno":                         {wrap(syscall.ECONNRESET), true},
		"use of closed network connection":   {wrap(net.ErrClosed), true},
		"pgconn conn closed":                 {wrap(pgconn.ErrConnClosed), true},
		"network timeout":                    {wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), true},
		"context deadline":                   {wrap(context.DeadlineExceeded), true},
		"connection exception 08006":         {wrap(pg("08006")), true},
		"connection does not exist 08003":    {wrap(pg("08003")), true},
		"admin shutdown 57P01":               {wrap(pg("57P01")), true},
		"crash shutdown 57P02":               {wrap(pg("57P02")), true},
		"cannot connect now 57P03":           {wrap(pg("57P03")), true},
		"too many connections 53300":         {wrap(pg("53300")), true},
		"statement timeout 57014":            {wrap(pg("57014")), true},
		"read-only transaction 25006":        {wrap(pg("25006")), true},
		"connect error":                      {wrap(&pgconn.ConnectError{}), true},
		"unique violation 23505":             {wrap(pg("23505")), false},
		"serialization failure 40001":        {wrap(pg("40001")), false},
		"undefined table 42P01":              {wrap(pg("42P01")), false},
		"invalid password 28P01":             {wrap(pg("28P01")), false},
		"context canceled (the client left)": {wrap(context.Canceled), false},
		"not found":                          {wrap(store.ErrNotFound), false},
		"any other error":                    {errors.New("boom"), false},
		"nil":                                {nil, false},
		"short code does not panic":          {wrap(pg("0")), false},
		"pgconn error wrapping a reset":      {wrap(fmt.Errorf("receive message failed: %w", opErr("read", syscall.ECONNRESET))), true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, store.IsUnavailable(tc.err), "%v", tc.err)
		})
	}
}

// A connection whose server stopped taking writes — a primary demoted by a
// failover manager, which pg_auto_failover does by setting
// default_transaction_read_only before it stops the server — answers every
// write 25006 for as long as it lives. The pool closes it on that answer,
// so the next statement connects again (and, with several hosts and
// target_session_attrs=read-write, to the node that takes writes).
func TestOpenPool_AConnectionThatTurnedReadOnlyIsDiscarded(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	st, err := store.OpenPool(ctx, u.String(), 0)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var before uint32
	require.NoError(t, st.Conns().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&before))
	// The pool's one connection: its server now refuses writes.
	_, err = st.Conns().Exec(ctx, `SET SESSION default_transaction_read_only = on`)
	require.NoError(t, err)

	_, _, err = st.APIKeyCreate(ctx, store.APIKeyCreateParams{Now: time.Now(), Name: "demoted", Scopes: store.WalletScopes("w")})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "25006", pgErr.Code)
	require.True(t, store.IsUnavailable(err), "a read-only server is unavailable for writes, not a refusal: %v", err)

	_, _, err = st.APIKeyCreate(ctx, store.APIKeyCreateParams{Now: time.Now(), Name: "promoted", Scopes: store.WalletScopes("w")})
	require.NoError(t, err, "the next write gets a new connection")
	var after uint32
	require.NoError(t, st.Conns().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&after))
	require.NotEqual(t, before, after, "the read-only connection was closed")
}
