package wallet_test

import (
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// Webhooks of the wallet lane (engine-core's): the worker's transitions write
// their events in the outbox, in the transaction of the change.

// outboxEvent is one stored delivery: its type and the hash it names.
type outboxEvent struct {
	Type   store.WebhookEventType
	TxHash string
}

// subscribeAll registers an endpoint of wallet w for every event.
func (e *env) subscribeAll(t *testing.T, w int) {
	t.Helper()
	e.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: e.wallets[w].ID, URL: "https://example.test/hook"})
}

// outboxOf returns the deliveries of task in the order they were written:
// by time, then by transaction, then within it.
func (e *env) outboxOf(t *testing.T, task store.Task) []outboxEvent {
	t.Helper()
	rows, err := e.st.DB().Query(t.Context(), `
		SELECT event_type, payload FROM ledgerq.webhook_deliveries WHERE task_id = $1
		ORDER BY created_at, xmin::text::bigint, ctid`, task.ID)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var ev outboxEvent
		var payload []byte
		require.NoError(t, rows.Scan(&ev.Type, &payload))
		var data store.WebhookTaskData
		require.NoError(t, json.Unmarshal(payload, &data))
		ev.TxHash = data.TxHash
		out = append(out, ev)
	}
	require.NoError(t, rows.Err())
	return out
}

// A task run to done tells its wallet's endpoint exactly submitted, then
// confirmed, both with the transaction's hash.
func TestWebhooks_ATaskRunToDoneEmitsSubmittedThenConfirmedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.subscribeAll(t, 0)
	tasks := e.postN(t, 2)
	e.drive(t, e.pool, 20, tasks...)
	e.requireDoneOnce(t, tasks...)
	for _, task := range tasks {
		hash := e.task(t, task).TxHash
		require.Equal(t, []outboxEvent{{store.WebhookSubmitted, hash}, {store.WebhookConfirmed, hash}}, e.outboxOf(t, task))
	}
}

// A task whose stalled transaction is bumped tells submitted once per
// transaction broadcast (each bump has a new hash), then confirmed with the
// hash that was mined.
func TestWebhooks_ABumpedTaskEmitsSubmittedPerHashThenConfirmed(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) { c.StallTimeout = testStall }})
	e.subscribeAll(t, 0)
	tasks := e.postN(t, 1)
	e.drive(t, e.pool, 400, tasks...)
	e.requireDoneOnce(t, tasks...)
	done := e.task(t, tasks[0])
	require.Positive(t, done.Bumps)
	var want []outboxEvent
	for _, a := range e.attempts(t, tasks[0]) {
		want = append(want, outboxEvent{store.WebhookSubmitted, a.TxHash})
	}
	require.Len(t, want, done.Bumps+1)
	want = append(want, outboxEvent{store.WebhookConfirmed, done.TxHash})
	require.Equal(t, want, e.outboxOf(t, tasks[0]))
}
