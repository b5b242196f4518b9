package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
)

// lockBatches holds ACCESS EXCLUSIVE on ledgerq.batches from a connection of
// its own, so that every API statement on the table waits in PostgreSQL, as
// it does while the database is frozen. The lock is released by the returned
// function, or after hold at the latest (so that a server that waits for it
// fails the test instead of hanging it).
func lockBatches(t *testing.T, dbURL string, hold time.Duration) (release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = "locker"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE ledgerq.batches IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	done := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		select {
		case <-done:
		case <-time.After(hold):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}()
	var once bool
	release = func() {
		if !once {
			once = true
			close(done)
		}
		<-released
	}
	t.Cleanup(release)
	return release
}

// lockWaiters counts the backends of the API's pool (application_name
// ledgerq) that wait for a lock in database name.
func (f *apiFixture) lockWaiters() int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.db.AdminURL)
	require.NoError(f.t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(f.t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND application_name = 'ledgerq' AND wait_event_type = 'Lock'`, f.db.Name).Scan(&n))
	return n
}

func TestAPI_RequestsWhileTheDatabaseHangsAnswer503ByTheRequestTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *httpapi.Config) { c.RequestTimeout = 300 * time.Millisecond })
	id, payload := signedBatch(t)
	require.Equal(t, http.StatusCreated, f.post("/v1/batches", batchBody(t, id, "svc", payload, "")).StatusCode)
	newID, newPayload := signedBatch(t)

	release := lockBatches(t, f.db.URL, 20*time.Second)
	requests := map[string]func() httpResult{
		"GET one":  func() httpResult { return f.get("/v1/batches/" + id) },
		"GET list": func() httpResult { return f.get("/v1/batches?service_id=svc") },
		"POST":     func() httpResult { return f.post("/v1/batches", batchBody(t, newID, "svc", newPayload, "")) },
	}
	for name, do := range requests {
		began := time.Now()
		resp := do()
		took := time.Since(began)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s while the table is locked: %s", name, resp.Body)
		require.JSONEq(t, `{"success":false,"message":"database did not answer within 300ms"}`, resp.Body, name)
		require.Less(t, took, 3*time.Second, "%s answered after %s", name, took)
	}
	// The timed-out statements were cancelled in PostgreSQL, not left
	// waiting for the lock on connections the pool gave up.
	require.Eventually(t, func() bool { return f.lockWaiters() == 0 }, 5*time.Second, 50*time.Millisecond,
		"statements of timed-out requests still wait for the lock")

	release()
	for name, do := range requests {
		resp := do()
		want := http.StatusOK
		if name == "POST" {
			want = http.StatusCreated
		}
		require.Equal(t, want, resp.StatusCode, "%s after the lock is released: %s", name, resp.Body)
	}
	require.Equal(t, 2, f.count(), fmt.Sprintf("the POST that timed out stored nothing; its retry stored %s", newID))
}
