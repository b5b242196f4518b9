package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/client"
)

// fakeTx records the statement EnqueueTx runs and answers it with id, or
// fails its Scan with err. (ledgerq.send_tx comes with migration 00040; these
// tests pin the call EnqueueTx makes to the signature both sides agreed on.)
type fakeTx struct {
	sql  string
	args []any
	id   string
	err  error
}

func (f *fakeTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	f.sql, f.args = sql, args
	return f
}

func (f *fakeTx) Scan(dest ...any) error {
	if f.err != nil {
		return f.err
	}
	*dest[0].(*string) = f.id
	return nil
}

// The function's parameters by name, in the signature's order, each cast to
// its type.
const sendTxCall = `SELECT ledgerq.send_tx(wallet => $1::text, to_address => $2::text, value => $3::numeric, data => $4::bytea, idempotency_key => $5::text, gas_limit => $6::bigint, max_fee_per_gas => $7::numeric, max_priority_fee_per_gas => $8::numeric, priority => $9::integer, preflight => $10::boolean, function => $11::text, abi => $12::json, method => $13::text, args => $14::json)`

func TestEnqueueTx_CallsSendTxWithEveryFieldInItsPlace(t *testing.T) {
	t.Parallel()
	tx := &fakeTx{id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"}
	wei, _ := new(big.Int).SetString("1000000000000000000000", 10)
	id, err := client.EnqueueTx(t.Context(), tx, client.EnqueueTxParams{
		Wallet: "hot", To: beef, Value: wei, Data: []byte{0xca, 0xfe},
		IdempotencyKey: "order-42", GasLimit: 50000,
		MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(2e9),
		Priority: 5, SkipPreflight: true,
	})
	require.NoError(t, err)
	require.Equal(t, tx.id, id)
	require.Equal(t, sendTxCall, tx.sql)
	require.Equal(t, []any{"hot", strings.ToLower(beef), "1000000000000000000000", []byte{0xca, 0xfe}, "order-42",
		int64(50000), "30000000000", "2000000000", int32(5), false, nil, nil, nil, nil}, tx.args)
}

// A contract call by name goes to send_tx's function, abi, method and args,
// with no data.
func TestEnqueueTx_ACallGoesToTheCallParameters(t *testing.T) {
	t.Parallel()
	tx := &fakeTx{id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"}
	_, err := client.EnqueueTx(t.Context(), tx, client.EnqueueTxParams{Wallet: "hot", To: beef,
		ABI: json.RawMessage(`{"type":"function","name":"f","inputs":[]}`), Method: "f", Args: json.RawMessage(`[]`)})
	require.NoError(t, err)
	require.Equal(t, []any{"hot", strings.ToLower(beef), "0", nil, nil, nil, nil, nil, int32(0), true,
		nil, `{"type":"function","name":"f","inputs":[]}`, "f", `[]`}, tx.args)
	_, err = client.EnqueueTx(t.Context(), tx, client.EnqueueTxParams{Wallet: "hot", To: beef,
		Function: "transfer(address,uint256)", Args: json.RawMessage(`["` + beef + `","1"]`)})
	require.NoError(t, err)
	require.Equal(t, []any{"hot", strings.ToLower(beef), "0", nil, nil, nil, nil, nil, int32(0), true,
		"transfer(address,uint256)", nil, nil, `["` + beef + `","1"]`}, tx.args)
}

// The zero value of each optional field is the function's default: no NULL
// where the function's default is a value (0 wei, preflight on).
func TestEnqueueTx_ZeroFieldsAreTheFunctionsDefaults(t *testing.T) {
	t.Parallel()
	tx := &fakeTx{id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"}
	_, err := client.EnqueueTx(t.Context(), tx, client.EnqueueTxParams{Wallet: "hot", To: beef})
	require.NoError(t, err)
	require.Equal(t, []any{"hot", strings.ToLower(beef), "0", nil, nil, nil, nil, nil, int32(0), true, nil, nil, nil, nil}, tx.args)
}

// Each refusal send_tx raises is an *EnqueueError matching the sentinel of
// its HTTP twin, with the *pgconn.PgError under it.
func TestEnqueueTx_RefusalsAreTypedAndKeepThePostgreSQLError(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		pg       *pgconn.PgError
		is, isNt []error
		field    string
		refusal  client.Refusal
	}{
		"bad field": {
			pg:    &pgconn.PgError{Code: "22023", Message: "field to: must be 0x and 40 hex digits"},
			is:    []error{client.ErrBadRequest},
			isNt:  []error{client.ErrForbidden, client.ErrIdempotencyConflict},
			field: "to",
		},
		"another data exception": {
			pg: &pgconn.PgError{Code: "22003", Message: "numeric field overflow"},
			is: []error{client.ErrBadRequest},
		},
		"key reused": {
			pg:   &pgconn.PgError{Code: "23505", Message: `Idempotency-Key "order-42": wallet "hot" already has task 0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b under this key, stored from a different request`},
			is:   []error{client.ErrIdempotencyConflict},
			isNt: []error{client.ErrBadRequest, client.ErrConflict},
		},
		"wallet not allowed": {
			pg:   &pgconn.PgError{Code: "42501", Message: `wallet "cold": unknown, or not granted to this role`},
			is:   []error{client.ErrForbidden},
			isNt: []error{client.ErrPolicyRefused},
		},
		"wallet disabled": {
			pg:   &pgconn.PgError{Code: "55000", Message: `wallet hot is disabled: it takes no new task`},
			is:   []error{client.ErrConflict},
			isNt: []error{client.ErrForbidden},
		},
		"policy": {
			pg: &pgconn.PgError{Code: "P0001", Message: `refused by the policy of wallet "hot": value 101 wei is more than its cap per transaction, 100 wei`,
				Detail: `{"rule":"max_value","limit":"100","requested":"101"}`},
			is:      []error{client.ErrPolicyRefused, client.ErrForbidden},
			isNt:    []error{client.ErrBadRequest},
			refusal: client.Refusal{Rule: "max_value", Limit: "100", Requested: "101"},
		},
		"window policy": {
			pg: &pgconn.PgError{Code: "P0001", Message: "refused",
				Detail: `{"rule":"value_window","limit":"100","used":"50","requested":"60","window_seconds":86400}`},
			is:      []error{client.ErrPolicyRefused},
			refusal: client.Refusal{Rule: "value_window", Limit: "100", Used: "50", Requested: "60", WindowSeconds: 86400},
		},
		"raise without a refusal": {
			pg:   &pgconn.PgError{Code: "P0001", Message: "something else", Detail: "not json"},
			isNt: []error{client.ErrPolicyRefused, client.ErrForbidden},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := client.EnqueueTx(t.Context(), &fakeTx{err: c.pg}, client.EnqueueTxParams{Wallet: "hot", To: beef})
			e := requireRefusal(t, err, c.pg, c.field, c.is, c.isNt)
			require.Equal(t, c.pg.Message, e.Message)
			require.Equal(t, c.refusal, e.Refusal)
			require.Contains(t, err.Error(), "wallet hot")
		})
	}
}

// An error that is not a refusal (a lost connection, a serialization
// failure, no such function before the migration) is returned as it is.
func TestEnqueueTx_OtherErrorsAreNotRefusals(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{
		errors.New("conn closed"),
		&pgconn.PgError{Code: "40001", Message: "could not serialize access"},
		&pgconn.PgError{Code: "42883", Message: "function ledgerq.send_tx(…) does not exist"},
	} {
		_, err := client.EnqueueTx(t.Context(), &fakeTx{err: cause}, client.EnqueueTxParams{Wallet: "hot", To: beef})
		require.ErrorIs(t, err, cause)
		var e *client.EnqueueError
		require.False(t, errors.As(err, &e), "%v is not a refusal", cause)
	}
}

// SubmitBatchTx calls ledgerq.submit_batch by its parameters' names, each
// cast to its type, with the service and the batch's bytes as they are.
func TestSubmitBatchTx_CallsSubmitBatchWithBothArgumentsInTheirPlace(t *testing.T) {
	t.Parallel()
	tx := &fakeTx{id: "ab12"}
	id, err := client.SubmitBatchTx(t.Context(), tx, "orders", []byte{0x0a, 0x01, 0x02})
	require.NoError(t, err)
	require.Equal(t, "ab12", id)
	require.Equal(t, `SELECT ledgerq.submit_batch(service_id => $1::text, batch => $2::bytea)`, tx.sql)
	require.Equal(t, []any{"orders", []byte{0x0a, 0x01, 0x02}}, tx.args)
}

// Each refusal submit_batch raises is an *EnqueueError matching the sentinel
// of its HTTP twin (POST /v1/batches): a batch id stored with another service
// or payload is HTTP's 409, so ErrConflict, not the idempotency conflict
// send_tx's 23505 is. A SQLSTATE submit_batch does not raise is no refusal.
func TestSubmitBatchTx_RefusalsAreTypedAsHTTPAnswersThem(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		pg       *pgconn.PgError
		is, isNt []error
		field    string
	}{
		"bad field": {
			pg:    &pgconn.PgError{Code: "22023", Message: "field batch: malformed batch: header_signature is missing"},
			is:    []error{client.ErrBadRequest},
			isNt:  []error{client.ErrForbidden, client.ErrConflict},
			field: "batch",
		},
		"id stored with another payload": {
			pg:   &pgconn.PgError{Code: "23505", Message: `batch "ab12" already exists with a different payload`},
			is:   []error{client.ErrConflict},
			isNt: []error{client.ErrIdempotencyConflict, client.ErrBadRequest},
		},
		"service not granted": {
			pg:   &pgconn.PgError{Code: "42501", Message: `service orders: role shop may not submit batches for it (ledgerq.enqueue_service_grants)`},
			is:   []error{client.ErrForbidden},
			isNt: []error{client.ErrPolicyRefused, client.ErrConflict},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := client.SubmitBatchTx(t.Context(), &fakeTx{err: c.pg}, "orders", []byte{1})
			e := requireRefusal(t, err, c.pg, c.field, c.is, c.isNt)
			require.Equal(t, "ledgerq.submit_batch", e.Function)
			require.Contains(t, err.Error(), "service orders")
			require.Contains(t, err.Error(), "ledgerq.submit_batch: ")
		})
	}
	for _, cause := range []error{
		errors.New("conn closed"),
		&pgconn.PgError{Code: "40001", Message: "could not serialize access"},
		&pgconn.PgError{Code: "P0001", Message: "raised", Detail: `{"rule":"max_value"}`},
		&pgconn.PgError{Code: "55000", Message: "not in prerequisite state"},
	} {
		_, err := client.SubmitBatchTx(t.Context(), &fakeTx{err: cause}, "orders", []byte{1})
		require.ErrorIs(t, err, cause)
		var e *client.EnqueueError
		require.False(t, errors.As(err, &e), "%v is not one of submit_batch's refusals", cause)
	}
}

// requireRefusal checks that err is the *client.EnqueueError of the
// PostgreSQL error pg (kept under it), naming field, matching each of is
// and none of isNt; it returns it.
func requireRefusal(t *testing.T, err error, pg *pgconn.PgError, field string, is, isNt []error) *client.EnqueueError {
	t.Helper()
	var e *client.EnqueueError
	require.ErrorAs(t, err, &e)
	require.Equal(t, pg.Code, e.Code)
	require.Equal(t, field, e.Field())
	var under *pgconn.PgError
	require.ErrorAs(t, err, &under)
	require.Same(t, pg, under)
	for _, s := range is {
		require.ErrorIs(t, err, s)
	}
	for _, s := range isNt {
		require.NotErrorIs(t, err, s)
	}
	return e
}

// A mixed-case recipient with a right checksum is checked here and goes to
// send_tx in lower case (the database would check it again with a Keccak in
// PL/pgSQL); one with a wrong checksum, one case, or no address at all goes
// as it is, for send_tx to take or refuse.
func TestEnqueueTx_ChecksAChecksummedRecipientHereAndSendsItInLowerCase(t *testing.T) {
	t.Parallel()
	const checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed" // EIP-55's own example
	for _, c := range []struct{ to, sent string }{
		{checksummed, "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"},
		{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"}, // last letter's case wrong
		{"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"},
		{"0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED", "0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED"},
		{"0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, // send_tx refuses 0X
		{"5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"},
		{"", ""},
	} {
		tx := &fakeTx{id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"}
		_, err := client.EnqueueTx(t.Context(), tx, client.EnqueueTxParams{Wallet: "hot", To: c.to})
		require.NoError(t, err)
		require.Equal(t, c.sent, tx.args[1], "To %q", c.to)
	}
}
