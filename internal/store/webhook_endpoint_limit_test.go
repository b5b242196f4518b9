package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// A wallet's endpoints are capped, and concurrent creates (each its own
// committed transaction) cannot pass the cap together; other wallets count
// apart.
func TestWebhookEndpointCreate_ConcurrentCreatesStopAtMaxEndpoints(t *testing.T) {
	t.Parallel()
	st := testdb.New(t).Store
	ctx := context.Background()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const max, tries = 3, 24
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created = map[string]int{}
	)
	for i := range tries {
		wallet := []string{"alpha", "beta"}[i%2]
		wg.Go(func() {
			_, err := st.WebhookEndpointCreate(ctx, store.WebhookEndpointCreateParams{
				Now: now, Wallet: wallet, URL: fmt.Sprintf("https://example.test/%d", i), MaxEndpoints: max,
			})
			if err != nil {
				require.ErrorIs(t, err, store.ErrWebhookEndpointLimit)
				return
			}
			mu.Lock()
			created[wallet]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"alpha": max, "beta": max}, created)
	for _, wallet := range []string{"alpha", "beta"} {
		list, err := st.WebhookEndpointList(ctx, wallet)
		require.NoError(t, err)
		require.Len(t, list, max, wallet)
	}

	// No limit when none is given.
	for i := range max + 2 {
		_, err := st.WebhookEndpointCreate(ctx, store.WebhookEndpointCreateParams{Now: now, Wallet: "gamma", URL: fmt.Sprintf("https://example.test/g%d", i)})
		require.NoError(t, err)
	}
}
