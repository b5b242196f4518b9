package testdb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/store"
)

// Rule tests that need no commit and no NOTIFY run in a transaction that is
// rolled back when the test ends (docs/design.md, "Finding and running a
// rule's tests"). A rolled-back transaction leaves its database as it found
// it, so these databases are reused: a test takes a free one, or clones a new
// one from the template, and gives it back after its rollback. Tests running
// in parallel never share one, so none waits on another's uncommitted rows
// (two transactions inserting the same id in one database would block each
// other on the primary key).
var (
	txMu   sync.Mutex
	txFree []string // databases no test holds
	txAll  []string // every database made for NewTx, dropped by Main
)

// NewTx returns a store whose every statement runs inside one transaction on a
// migrated database of its own; the transaction is rolled back when t ends.
// The store's own transactions become savepoints (store.NewTx). Use it for
// tests that need no commit and no NOTIFY: notifications are only sent on
// commit, and nothing outside the transaction sees its rows. Tests that need
// either use New.
func NewTx(t testing.TB) *store.Store {
	t.Helper()
	s := get(t)
	name, err := takeTxDatabase(s)
	if err != nil {
		t.Fatalf("testdb: creating a database for a transaction on %s: %v", s.source, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, withDatabase(s.adminURL, name))
	if err != nil {
		releaseTxDatabase(name)
		t.Fatalf("testdb: connecting to %s: %v", name, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		_ = conn.Close(ctx)
		releaseTxDatabase(name)
		t.Fatalf("testdb: beginning a transaction on %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rbErr := tx.Rollback(ctx)
		closeErr := conn.Close(ctx)
		if rbErr != nil || closeErr != nil {
			// Not given back: what the test left behind may still be there.
			// Main drops it with the others.
			t.Logf("testdb: rolling back the transaction on %s: %v; closing: %v", name, rbErr, closeErr)
			return
		}
		releaseTxDatabase(name)
	})
	return store.NewTx(tx)
}

func takeTxDatabase(s *server) (string, error) {
	txMu.Lock()
	if n := len(txFree); n > 0 {
		name := txFree[n-1]
		txFree = txFree[:n-1]
		txMu.Unlock()
		return name, nil
	}
	txMu.Unlock()
	name := fmt.Sprintf("%s_tx_%d", prefix, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := createDatabase(ctx, s.adminURL, name, s.template); err != nil {
		return "", err
	}
	txMu.Lock()
	txAll = append(txAll, name)
	txMu.Unlock()
	return name, nil
}

func releaseTxDatabase(name string) {
	txMu.Lock()
	defer txMu.Unlock()
	txFree = append(txFree, name)
}

// dropTxDatabases drops the databases NewTx made; Main calls it after the
// tests, before the server stops (an external server outlives the run).
func dropTxDatabases(s *server) {
	txMu.Lock()
	names := txAll
	txAll, txFree = nil, nil
	txMu.Unlock()
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := dropDatabase(ctx, s.adminURL, name); err != nil {
			logf("dropping %s: %v", name, err)
		}
		cancel()
	}
}
