package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The tests and examples import ledgerq's internal packages to run the real
// server; the client package itself imports none (TestClient_ImportsNoInternalPackage).

func TestMain(m *testing.M) { testdb.Main(m) }

// ledgerq is a running ledgerq (API, wallet and batch lanes) over a fresh
// database, sending the wallet "hot"'s tasks to a simulated chain and the
// batches to a simulated Sawtooth ledger.
type ledgerq struct {
	URL string
	// Key opens the wallet hot; Admin opens everything.
	Key, Admin string
	Chain      *evmsim.Ledger
	Batches    *sim.Ledger
	// DatabaseURL is ledgerq's database, where an application's own
	// tables can live too (EnqueueTx).
	DatabaseURL string
}

// startLedgerq runs ledgerq until tb ends. Its send-tx long-poll waits up to
// maxWait.
func startLedgerq(tb testing.TB, maxWait time.Duration) *ledgerq {
	tb.Helper()
	db := testdb.New(tb)
	signer := testfactory.NewSigner(tb)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "hot", ChainID: 1337, Signer: signer})
	if err != nil {
		tb.Fatal(err)
	}
	chain := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond,
		Alloc: map[common.Address]*big.Int{common.Address(signer.Address()): new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))}})

	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Registry = reg
	cfg.Wallet.Ledger.Instance = chain
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.API.TaskMaxWait = maxWait
	batches := node.NewSimLedger(cfg.Batch.Ledger.Sim, clock.Real{}, cfg.Logger)
	cfg.Batch.Ledger.Instance = batches
	n, err := node.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("opening ledgerq: %v", err)
	}
	srv := httptest.NewServer(n.Handler())
	if err := n.Start(context.Background()); err != nil {
		tb.Fatalf("starting ledgerq: %v", err)
	}
	tb.Cleanup(func() {
		srv.Close()
		n.Stop()
		n.Close()
	})
	_, key, err := n.Store().APIKeyCreate(context.Background(), store.APIKeyCreateParams{Now: time.Now(), Name: "app", Scopes: store.WalletScopes("hot")})
	if err != nil {
		tb.Fatal(err)
	}
	_, admin, err := n.Store().APIKeyCreate(context.Background(), store.APIKeyCreateParams{Now: time.Now(), Name: "ops", Scopes: []store.Scope{store.ScopeAdmin}})
	if err != nil {
		tb.Fatal(err)
	}
	return &ledgerq{URL: srv.URL, Key: key, Admin: admin, Chain: chain, Batches: batches, DatabaseURL: db.URL}
}

// mined says whether the chain has the transaction hash in a block.
func (l *ledgerq) mined(hash string) bool {
	r, err := l.Chain.TransactionReceipt(context.Background(), [32]byte(common.HexToHash(hash)))
	return err == nil && r.Found
}

// committed says whether the simulated Sawtooth ledger has committed the
// batch id.
func (l *ledgerq) committed(id string) bool {
	st, err := l.Batches.BatchStatuses(context.Background(), []string{id})
	return err == nil && st[id].Status == ledger.BatchCommitted
}

// signedBatch is a Sawtooth batch as an application's signer makes it: one
// transaction whose payload is note, signed with a fresh key, serialized.
func signedBatch(tb testing.TB, note string) []byte {
	tb.Helper()
	signer, err := sawtooth.GenerateSigner()
	if err != nil {
		tb.Fatal(err)
	}
	_, batch, err := signer.NewBatch([]byte(note))
	if err != nil {
		tb.Fatal(err)
	}
	return batch
}

// exampleTB lets an Example use the tests' helpers, which take a testing.TB:
// it has no *testing.T. A failure panics (the example fails with it), and
// Cleanup's functions run at close. Helpers may call only the methods below
// (the embedded nil testing.TB panics on any other).
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (e *exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleTB) Logf(f string, a ...any)   { fmt.Fprintf(os.Stderr, f+"\n", a...) }
func (e *exampleTB) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }

func (e *exampleTB) close() {
	for _, f := range slices.Backward(e.cleanups) {
		f()
	}
}
