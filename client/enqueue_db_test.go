package client_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/client"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// EnqueueTx against the real ledgerq.send_tx of a migrated database: every
// field lands in its column, a replay under the same key is the same task,
// zero fields take the function's defaults, and each refusal is typed (with
// the field it names) and keeps the PostgreSQL error.
func TestEnqueueTx_AgainstSendTxStoresEveryFieldAndTypesEveryRefusal(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	pool := db.Store.DB()
	_, err := pool.Exec(ctx, `INSERT INTO ledgerq.wallet_directory (wallet_id, chain_id, sender, source, updated_at) VALUES ('hot', 1337, '0x00000000000000000000000000000000000000aa', 'config', now())`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES (session_user, 'hot')`)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	wei, _ := new(big.Int).SetString("1000000000000000000000", 10)
	p := client.EnqueueTxParams{Wallet: "hot", To: beef, Value: wei, Data: []byte{0xca, 0xfe},
		IdempotencyKey: "order-42", GasLimit: 50000, MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(2e9),
		Priority: 5, SkipPreflight: true}
	id, err := client.EnqueueTx(ctx, tx, p)
	require.NoError(t, err)
	var value, fee, tip string
	var data []byte
	var gas int64
	var prio int32
	var preflight bool
	var key string
	require.NoError(t, tx.QueryRow(ctx, `SELECT value_wei::text, data, gas_limit, fee_cap_wei::text, tip_cap_wei::text, priority, preflight, idempotency_key FROM ledgerq.wallet_tasks WHERE id::text = $1`, id).
		Scan(&value, &data, &gas, &fee, &tip, &prio, &preflight, &key))
	t.Log(id, value, data, gas, fee, tip, prio, preflight, key)
	require.Equal(t, "1000000000000000000000", value)
	require.Equal(t, []byte{0xca, 0xfe}, data)
	require.Equal(t, int64(50000), gas)
	require.Equal(t, "30000000000", fee)
	require.Equal(t, "2000000000", tip)
	require.Equal(t, int32(5), prio)
	require.False(t, preflight)
	require.Equal(t, "order-42", key)

	again, err := client.EnqueueTx(ctx, tx, p)
	require.NoError(t, err)
	require.Equal(t, id, again, "same key, same fields")

	def, err := client.EnqueueTx(ctx, tx, client.EnqueueTxParams{Wallet: "hot", To: beef})
	require.NoError(t, err)
	require.NotEqual(t, id, def)
	require.NoError(t, tx.QueryRow(ctx, `SELECT value_wei::text, data, priority, preflight FROM ledgerq.wallet_tasks WHERE id::text = $1`, def).Scan(&value, &data, &prio, &preflight))
	require.Equal(t, "0", value)
	require.Empty(t, data)
	require.True(t, preflight)

	// A call by name: the database encodes it into the task's data.
	call, err := client.EnqueueTx(ctx, tx, client.EnqueueTxParams{Wallet: "hot", To: beef,
		Function: "transfer(address,uint256)", Args: json.RawMessage(`["0x00000000000000000000000000000000000000bb", 16]`)})
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT data FROM ledgerq.wallet_tasks WHERE id::text = $1`, call).Scan(&data))
	require.Equal(t, "a9059cbb"+"00000000000000000000000000000000000000000000000000000000000000bb"+
		"0000000000000000000000000000000000000000000000000000000000000010", hex.EncodeToString(data))
	require.NoError(t, tx.Commit(ctx))

	_, err = pool.Exec(ctx, `INSERT INTO ledgerq.wallet_policies (wallet_id, policy, source, updated_by, created_at, updated_at) VALUES ('hot', '{"max_value_per_tx":"100"}', 'api', 'test', now(), now())`)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		p     client.EnqueueTxParams
		is    error
		field string
	}{
		"conflict": {p: client.EnqueueTxParams{Wallet: "hot", To: beef, Value: big.NewInt(1), IdempotencyKey: "order-42"}, is: client.ErrIdempotencyConflict},
		"bad to":   {p: client.EnqueueTxParams{Wallet: "hot", To: "0x12"}, is: client.ErrBadRequest, field: "to"},
		"bad arg":  {p: client.EnqueueTxParams{Wallet: "hot", To: beef, Function: "f(uint8)", Args: json.RawMessage(`[256]`)}, is: client.ErrBadRequest, field: "args[0]"},
		"fee":      {p: client.EnqueueTxParams{Wallet: "hot", To: beef, MaxFeePerGas: big.NewInt(1), MaxPriorityFeePerGas: big.NewInt(2)}, is: client.ErrBadRequest, field: "max_fee_per_gas"},
		"wallet":   {p: client.EnqueueTxParams{Wallet: "cold", To: beef}, is: client.ErrForbidden},
		"policy":   {p: client.EnqueueTxParams{Wallet: "hot", To: beef, Value: big.NewInt(101)}, is: client.ErrPolicyRefused},
	} {
		_, err := client.EnqueueTx(ctx, pool, c.p)
		require.ErrorIs(t, err, c.is, name)
		var e *client.EnqueueError
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, c.field, e.Field(), name)
		t.Log(name, err, e.Refusal)
	}
}

// SubmitBatchTx against the real ledgerq.submit_batch of a migrated
// database: the batch is stored, unverified, when the application's
// transaction commits and not before; a rolled-back transaction leaves no
// row; each refusal is typed as HTTP answers it and keeps the PostgreSQL
// error.
func TestSubmitBatchTx_AgainstSubmitBatchCommitsRollsBackAndTypesEveryRefusal(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	pool := db.Store.DB()
	_, err := pool.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app.orders (id bigserial PRIMARY KEY, batch_id text);
		INSERT INTO ledgerq.enqueue_service_grants (role_name, service_id) VALUES (session_user, 'orders'), (session_user, 'refunds')`)
	require.NoError(t, err)
	signer, err := sawtooth.GenerateSigner()
	require.NoError(t, err)
	newBatch := func(note string) (string, []byte) {
		id, payload, err := signer.NewBatch([]byte(note))
		require.NoError(t, err)
		return id, payload
	}
	// stored counts the batch's rows as another session sees them.
	stored := func(id string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
			WHERE p.id = $1 AND p.unverified AND b.service_id = 'orders'`, id).Scan(&n))
		return n
	}
	// order is the application's transaction: an order and its batch.
	order := func(payload []byte, commit bool) string {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		id, err := client.SubmitBatchTx(ctx, tx, "orders", payload)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO app.orders (batch_id) VALUES ($1)`, id)
		require.NoError(t, err)
		require.Zero(t, stored(id), "not visible before the commit")
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
		return id
	}

	want, payload := newBatch("committed")
	id := order(payload, true)
	require.Equal(t, want, id, "the id is the batch's header_signature")
	require.Equal(t, 1, stored(id))
	b, err := db.Store.BatchGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "orders", b.ServiceID)
	again, err := client.SubmitBatchTx(ctx, pool, "orders", payload)
	require.NoError(t, err)
	require.Equal(t, id, again, "the same batch again is the same batch")
	require.Equal(t, 1, stored(id))

	_, rolledBack := newBatch("rolled back")
	gone := order(rolledBack, false)
	require.Zero(t, stored(gone))
	_, err = db.Store.BatchGet(ctx, gone)
	require.ErrorIs(t, err, store.ErrNotFound)
	var orders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM app.orders`).Scan(&orders))
	require.Equal(t, 1, orders, "the rolled-back order went with its batch")

	_, other := newBatch("other")
	for name, c := range map[string]struct {
		service string
		batch   []byte
		is      error
		isNt    error
		field   string
	}{
		"not a batch":     {service: "orders", batch: []byte("not a batch"), is: client.ErrBadRequest, field: "batch"},
		"no service":      {service: "", batch: other, is: client.ErrBadRequest, field: "service_id"},
		"another service": {service: "refunds", batch: payload, is: client.ErrConflict, isNt: client.ErrIdempotencyConflict},
		"not granted":     {service: "payroll", batch: other, is: client.ErrForbidden, isNt: client.ErrPolicyRefused},
	} {
		_, err := client.SubmitBatchTx(ctx, pool, c.service, c.batch)
		require.ErrorIs(t, err, c.is, name)
		if c.isNt != nil {
			require.NotErrorIs(t, err, c.isNt, name)
		}
		var e *client.EnqueueError
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, "ledgerq.submit_batch", e.Function, name)
		require.Equal(t, c.field, e.Field(), name)
		t.Log(name, err)
	}
}
