package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

// What a connection lost to a restart, a crash, a terminated backend or a
// network cut looks like through pgx: the API answers these 503 (retry
// later), and everything else the database says is a refusal (4xx/500).
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
