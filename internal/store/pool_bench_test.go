package store_test

import (
	"sync/atomic"
	"testing"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// BenchmarkPoolAdd is the builder lane's intake in the database alone, as
// `ledgerq bench builder` loads it: 16 senders at a time per CPU, each
// adding 16 transactions in nonce order through store.PoolAdd (the lock,
// the reads, the insert, the admission) before the next sender starts, on a
// fresh database, no HTTP and no chain. An op is one admitted transaction.
//
//	go test ./internal/store -run '^$' -bench PoolAdd -benchtime 5000x
func BenchmarkPoolAdd(b *testing.B) {
	st := testdb.New(b).Store
	limits := store.DefaultPoolLimits()
	limits.MaxPending, limits.MaxQueued, limits.MaxPerSender = 1<<30, 1<<30, 1<<30
	now := testfactory.Start()
	var senders atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sender, nonce := int(senders.Add(1)), uint64(0)
		for ; pb.Next(); nonce++ {
			if nonce == 16 {
				sender, nonce = int(senders.Add(1)), 0
			}
			_, err := st.PoolAdd(b.Context(), store.PoolAddParams{
				Now: now, Tx: testfactory.PoolTx(sender, nonce, 10, 10), Limits: limits,
			})
			if err != nil {
				b.Fatalf("sender %d nonce %d: %v", sender, nonce, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}
