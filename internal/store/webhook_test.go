package store_test

// Webhook endpoints and outbox: rule tests in a rolled-back
// transaction with a fake clock, and the endpoint cap under concurrent
// creates in committed ones.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

type webhookSetup struct {
	t     *testing.T
	ctx   context.Context
	st    *store.Store
	clock *clock.Fake
	rows  *testfactory.Factory
}

func webhookSetupTx(t *testing.T) *webhookSetup {
	t.Helper()
	st, clk := testdb.NewTx(t), clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	return &webhookSetup{t: t, ctx: context.Background(), st: st, clock: clk, rows: testfactory.New(t, st, clk)}
}

func (w *webhookSetup) endpoint(wallet string, types ...store.WebhookEventType) store.WebhookEndpoint {
	w.t.Helper()
	return w.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: wallet, EventTypes: types})
}

func (w *webhookSetup) emit(evs ...store.WebhookEvent) int64 {
	w.t.Helper()
	n, err := w.st.WebhookEmit(w.ctx, w.clock.Now(), evs...)
	require.NoError(w.t, err)
	return n
}

func (w *webhookSetup) claim(max int) []store.WebhookDelivery {
	w.t.Helper()
	now := w.clock.Now()
	ds, err := w.st.WebhookDeliveryClaim(w.ctx, store.WebhookDeliveryClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Max: max})
	require.NoError(w.t, err)
	return ds
}

func taskEvent(wallet string, typ store.WebhookEventType, taskID string) store.WebhookEvent {
	return store.TaskWebhookEvent(typ, store.Task{ID: taskID, Wallet: wallet, ChainID: 1, Sender: "0x00000000000000000000000000000000000000a1", Status: store.TaskExecuting}, "", nil)
}

func TestWebhookEmit_OneDeliveryPerEnabledSubscribedEndpointOfTheWallet(t *testing.T) {
	t.Parallel()
	w := webhookSetupTx(t)
	all1, all2 := w.endpoint("alpha"), w.endpoint("alpha")
	confirmedOnly := w.endpoint("alpha", store.WebhookConfirmed)
	w.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: "alpha", URL: "https://example.test/off", Disabled: true})
	w.endpoint("beta")

	require.EqualValues(t, 2, w.emit(taskEvent("alpha", store.WebhookSubmitted, "t1")), "submitted: the two endpoints subscribed to all")
	require.EqualValues(t, 3, w.emit(taskEvent("alpha", store.WebhookConfirmed, "t1")), "confirmed: those and the confirmed-only one")
	require.EqualValues(t, 0, w.emit(taskEvent("gamma", store.WebhookFailed, "t9")), "a wallet without endpoints stores nothing")

	got := map[string][]store.WebhookEventType{}
	for _, d := range w.claim(100) {
		got[d.EndpointID] = append(got[d.EndpointID], d.Type)
		require.Equal(t, 1, d.Attempt)
		var data store.WebhookTaskData
		require.NoError(t, json.Unmarshal(d.Payload, &data))
		require.Equal(t, "t1", data.TaskID)
	}
	require.ElementsMatch(t, []store.WebhookEventType{store.WebhookSubmitted, store.WebhookConfirmed}, got[all1.ID])
	require.ElementsMatch(t, []store.WebhookEventType{store.WebhookSubmitted, store.WebhookConfirmed}, got[all2.ID])
	require.Equal(t, []store.WebhookEventType{store.WebhookConfirmed}, got[confirmedOnly.ID])
	require.Len(t, got, 3)
}

func TestWebhookDeliveryClaim_LeasedDeliveryIsClaimedAgainOnlyAfterTheLeaseWithTheSameID(t *testing.T) {
	t.Parallel()
	w := webhookSetupTx(t)
	w.endpoint("alpha")
	w.emit(taskEvent("alpha", store.WebhookSubmitted, "t1"))
	first := w.claim(10)
	require.Len(t, first, 1)
	require.Empty(t, w.claim(10), "leased")
	w.clock.Advance(time.Minute - time.Microsecond)
	require.Empty(t, w.claim(10), "still leased")
	w.clock.Advance(time.Microsecond)
	again := w.claim(10)
	require.Len(t, again, 1)
	require.Equal(t, first[0].ID, again[0].ID)
	require.Equal(t, 2, again[0].Attempt)

	// The first deliverer's late failure is not the current attempt's.
	ok, err := w.st.WebhookDeliveryMarkFailed(w.ctx, store.WebhookDeliveryMarkFailedParams{
		Now: w.clock.Now(), ID: first[0].ID, Attempt: first[0].Attempt, Error: "late", NextAttemptAt: w.clock.Now(),
	})
	require.NoError(t, err)
	require.False(t, ok)
	// Its late success is still a delivery.
	ok, err = w.st.WebhookDeliveryMarkDelivered(w.ctx, store.WebhookDeliveryMarkDeliveredParams{Now: w.clock.Now(), ID: first[0].ID, Status: 204})
	require.NoError(t, err)
	require.True(t, ok)
	w.clock.Advance(time.Hour)
	require.Empty(t, w.claim(10), "delivered is final")
}

func TestWebhookDeliveryMarkFailed_GivingUpIsFinalAndKeepsTheError(t *testing.T) {
	t.Parallel()
	w := webhookSetupTx(t)
	w.endpoint("alpha")
	w.emit(taskEvent("alpha", store.WebhookFailed, "t1"))
	d := w.claim(1)[0]
	ok, err := w.st.WebhookDeliveryMarkFailed(w.ctx, store.WebhookDeliveryMarkFailedParams{
		Now: w.clock.Now(), ID: d.ID, Attempt: d.Attempt, Status: 500, Error: "HTTP 500: boom", GiveUp: true,
	})
	require.NoError(t, err)
	require.True(t, ok)
	w.clock.Advance(24 * time.Hour)
	require.Empty(t, w.claim(10))
	got, err := w.st.WebhookDeliveryGet(w.ctx, d.ID)
	require.NoError(t, err)
	require.NotNil(t, got.GaveUpAt)
	require.Equal(t, "HTTP 500: boom", got.LastError)
	require.Equal(t, 500, got.LastStatus)
}

func TestWebhookEndpoint_ListedPerWalletAndDeletedOnlyByItsWallet(t *testing.T) {
	t.Parallel()
	w := webhookSetupTx(t)
	a1, a2, b := w.endpoint("alpha"), w.endpoint("alpha"), w.endpoint("beta")
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, a1.Secret)
	require.ElementsMatch(t, store.WebhookEventTypes, a1.EventTypes, "no event types given: all of them")

	err := w.st.WebhookEndpointDelete(w.ctx, "alpha", b.ID)
	require.True(t, errors.Is(err, store.ErrNotFound), "another wallet's endpoint is not found: %v", err)
	require.NoError(t, w.st.WebhookEndpointDelete(w.ctx, "alpha", a1.ID))
	list, err := w.st.WebhookEndpointList(w.ctx, "alpha")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, a2.ID, list[0].ID)
}

func TestWebhookEndpointCreate_RefusesAMalformedSecretOrEventType(t *testing.T) {
	t.Parallel()
	w := webhookSetupTx(t)
	_, err := w.st.WebhookEndpointCreate(w.ctx, store.WebhookEndpointCreateParams{
		Now: w.clock.Now(), Wallet: "alpha", URL: "https://example.test", Secret: "not-a-secret",
	})
	require.Error(t, err)
	_, err = w.st.WebhookEndpointCreate(w.ctx, store.WebhookEndpointCreateParams{
		Now: w.clock.Now(), Wallet: "alpha", URL: "https://example.test", EventTypes: []store.WebhookEventType{"mined"},
	})
	require.Error(t, err)
	_, err = w.st.WebhookEndpointCreate(w.ctx, store.WebhookEndpointCreateParams{
		Now: w.clock.Now(), Wallet: "alpha", URL: "ftp://example.test",
	})
	require.Error(t, err, "the table refuses a URL that is not http(s)")
}

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
