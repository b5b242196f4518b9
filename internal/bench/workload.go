package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Workload is the signed batches of one run, in the order ingest stores them:
// round-robin over the services (the first batch of every service, then the
// second, …), so every service has work from the start as it would with many
// independent clients.
type Workload struct {
	// Prefix starts every service id of the run ("bench-<random>-"); the
	// summary reads the run's rows by it.
	Prefix            string
	Services          int
	BatchesPerService int
	Batches           []store.NewBatch
	// GenerateTime is how long signing took.
	GenerateTime time.Duration
}

// runPrefix is a run's own prefix for the ids of the rows it writes
// ("bench-<random>-"): the summary reads the run's rows by it.
func runPrefix(kind string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // never fails (Go 1.24+)
	return kind + "-" + hex.EncodeToString(rnd[:]) + "-"
}

// NewWorkload signs services × perService batches, one key per service and
// one transaction per batch, on every CPU.
func NewWorkload(ctx context.Context, services, perService int) (*Workload, error) {
	if services < 1 || perService < 1 {
		return nil, errors.New("bench: a workload needs at least one service and one batch per service")
	}
	w := &Workload{
		Prefix:            runPrefix("bench"),
		Services:          services,
		BatchesPerService: perService,
		Batches:           make([]store.NewBatch, services*perService),
	}
	start := time.Now()
	signers := make([]*sawtooth.Signer, services)
	for i := range signers {
		s, err := sawtooth.GenerateSigner()
		if err != nil {
			return nil, err
		}
		signers[i] = s
	}

	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		genErr  error
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(w.Batches) || ctx.Err() != nil {
					return
				}
				svc, round := i%services, i/services
				serviceID := fmt.Sprintf("%ss%d", w.Prefix, svc)
				id, payload, err := signers[svc].NewBatch(fmt.Appendf(nil, "ledgerq bench %s batch %d", serviceID, round))
				if err != nil {
					errOnce.Do(func() { genErr = fmt.Errorf("signing batch %d of %s: %w", round, serviceID, err) })
					return
				}
				w.Batches[i] = store.NewBatch{ID: id, ServiceID: serviceID, Payload: payload}
			}
		})
	}
	wg.Wait()
	if genErr != nil {
		return nil, genErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("signing batches: %w", err)
	}
	w.GenerateTime = time.Since(start)
	return w, nil
}
