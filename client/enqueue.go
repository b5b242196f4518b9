package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs one statement that returns one row: pgx.Tx satisfies it (and
// so do *pgx.Conn and *pgxpool.Pool, though the point of EnqueueTx is the
// application's own transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EnqueueTxParams is a send-tx task, as ledgerq.send_tx takes it. The zero
// value of each optional field is the function's default.
type EnqueueTxParams struct {
	// Wallet is the wallet's name; the database role must be allowed to use it.
	Wallet string
	// To is the recipient, 0x and 40 hex digits (a mixed-case address must
	// carry a valid EIP-55 checksum: EnqueueTx checks it here and sends the
	// address in lower case, which send_tx takes without checking again).
	To string
	// Value is the wei to send; nil is 0.
	Value *big.Int
	// Data is the call data; nil is none.
	Data []byte
	// Function ("transfer(address,uint256)"), or ABI (an entry or an
	// array of entries) and Method (a name, or a signature when the name
	// is overloaded), name a contract call that the database encodes into
	// the task's data, as POST send-tx's fields of those names do; Args
	// is its arguments, a JSON array. Data must then be nil.
	Function string
	ABI      json.RawMessage
	Method   string
	Args     json.RawMessage
	// IdempotencyKey, when set, makes the call idempotent per wallet, as the
	// HTTP header is: the same key and fields answer the stored task's id,
	// the same key and other fields are ErrIdempotencyConflict.
	IdempotencyKey string
	// GasLimit is the gas limit; 0 lets the worker estimate it.
	GasLimit int64
	// MaxFeePerGas and MaxPriorityFeePerGas are the first transaction's
	// fees in wei per gas; nil takes the node's suggestion.
	MaxFeePerGas, MaxPriorityFeePerGas *big.Int
	// Priority orders the wallet's queue with the priority queue type.
	Priority int32
	// SkipPreflight sends without the eth_call before the nonce (the HTTP
	// field preflight: false).
	SkipPreflight bool
}

// enqueueTxSQL calls the function by its parameters' names, each cast to its
// type, so that no argument can land in another's place.
const enqueueTxSQL = `SELECT ledgerq.send_tx(wallet => $1::text, to_address => $2::text, value => $3::numeric, data => $4::bytea, idempotency_key => $5::text, gas_limit => $6::bigint, max_fee_per_gas => $7::numeric, max_priority_fee_per_gas => $8::numeric, priority => $9::integer, preflight => $10::boolean, function => $11::text, abi => $12::json, method => $13::text, args => $14::json)`

// recipient is to as EnqueueTx gives it to send_tx: a mixed-case address
// whose EIP-55 checksum is right goes in lower case, and anything else as it
// is. send_tx checks a mixed-case address's checksum with a Keccak-256 in
// PL/pgSQL, which costs the database more than the rest of the call (about
// 0.09 ms against 1 µs here); the task, and the request's fingerprint under
// an idempotency key, are the same in either case. A wrong checksum, or text
// that is no address, is left for send_tx to refuse in its own words.
func recipient(to string) string {
	if len(to) == 42 && strings.HasPrefix(to, "0x") && common.IsHexAddress(to) && common.HexToAddress(to).Hex() == to {
		return strings.ToLower(to)
	}
	return to
}

// EnqueueTx stores a send-tx task with ledgerq.send_tx in q, the
// application's own transaction, and returns the task's id. The task exists
// if and only if that transaction commits; ledgerq's wallet worker picks it up
// on the commit. A refusal is an *EnqueueError (ErrBadRequest naming the
// field, ErrIdempotencyConflict, ErrForbidden, ErrPolicyRefused,
// ErrConflict), with the
// *pgconn.PgError under it; PostgreSQL then has aborted the transaction, as
// for any error in it (use a savepoint, q being a nested pgx.Tx, to go on).
func EnqueueTx(ctx context.Context, q Querier, p EnqueueTxParams) (string, error) {
	var id string
	err := q.QueryRow(ctx, enqueueTxSQL,
		p.Wallet, recipient(p.To), decimal(p.Value, "0"), dataOrNull(p.Data), nullString(p.IdempotencyKey),
		nullInt64(p.GasLimit), decimalOrNull(p.MaxFeePerGas), decimalOrNull(p.MaxPriorityFeePerGas),
		p.Priority, !p.SkipPreflight,
		nullString(p.Function), nullString(string(p.ABI)), nullString(p.Method), nullString(string(p.Args)),
	).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("enqueueing a task for wallet %s: %w", p.Wallet, enqueueError(sendTxFunc, err))
	}
	return id, nil
}

// submitBatchSQL calls the function by its parameters' names, each cast to
// its type, as enqueueTxSQL does.
const submitBatchSQL = `SELECT ledgerq.submit_batch(service_id => $1::text, batch => $2::bytea)`

// SubmitBatchTx stores batch, a signed and serialized Sawtooth Batch of the
// service serviceID, with ledgerq.submit_batch in q, the application's own
// transaction, and returns the batch's id (its header_signature). The batch
// exists if and only if that transaction commits; ledgerq's batch submitters
// are woken on the commit.
//
// SQL cannot check secp256k1: the batch's signatures are checked by the
// submitter before it sends the batch, and a batch that fails ends invalid
// with the reason, unsent. Success here is not the batch's verdict: follow it
// with GET /v1/batches/{id} (API().GetBatchWithResponse).
//
// A refusal is an *EnqueueError (ErrBadRequest naming the field, ErrConflict
// for an id stored with another service or other bytes, ErrForbidden for a
// service the role may not use), with the *pgconn.PgError under it;
// PostgreSQL then has aborted the transaction, as for any error in it.
func SubmitBatchTx(ctx context.Context, q Querier, serviceID string, batch []byte) (string, error) {
	var id string
	if err := q.QueryRow(ctx, submitBatchSQL, serviceID, batch).Scan(&id); err != nil {
		return "", fmt.Errorf("submitting a batch for service %s: %w", serviceID, enqueueError(submitBatchFunc, err))
	}
	return id, nil
}

// The SQL functions whose refusals an *EnqueueError types.
const (
	sendTxFunc      = "ledgerq.send_tx"
	submitBatchFunc = "ledgerq.submit_batch"
)

// EnqueueError is the refusal of one of ledgerq's SQL functions
// (ledgerq.send_tx, ledgerq.submit_batch): the SQLSTATE, the message (the
// same as HTTP's for the same refusal) and, for a policy refusal, the rule.
// The *pgconn.PgError stays reachable with errors.As.
type EnqueueError struct {
	// Function is the function that refused: "ledgerq.send_tx" (EnqueueTx)
	// or "ledgerq.submit_batch" (SubmitBatchTx).
	Function string
	// Code is the SQLSTATE: 22023 (or another of class 22) bad input, 23505
	// the key reused with other fields (send_tx) or the batch id stored with
	// another service or payload (submit_batch), 42501 a wallet or service
	// the role may not use, P0001 a policy refusal, 55000 a disabled wallet.
	Code    string
	Message string
	// Refusal is set (Rule not empty) when the wallet's policy refused.
	Refusal
	pg *pgconn.PgError
}

func (e *EnqueueError) Error() string {
	return fmt.Sprintf("%s: %s (SQLSTATE %s)", cmp.Or(e.Function, sendTxFunc), e.Message, e.Code)
}

// Unwrap is the PostgreSQL error.
func (e *EnqueueError) Unwrap() error { return e.pg }

// Field is the field a bad-input refusal names ("field to: …" → "to"), or "".
func (e *EnqueueError) Field() string { return fieldOf(e.Message) }

// Is matches the sentinel of the SQLSTATE: ErrBadRequest (class 22),
// ErrForbidden (42501, and P0001 with a rule), ErrPolicyRefused (P0001 with
// a rule), ErrConflict (55000, a disabled wallet, HTTP's 409), and 23505 as
// HTTP answers it: ErrIdempotencyConflict from send_tx (HTTP's 422),
// ErrConflict from submit_batch (a batch id stored with another service or
// payload, HTTP's 409).
func (e *EnqueueError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return len(e.Code) == 5 && e.Code[:2] == "22"
	case ErrIdempotencyConflict:
		return e.Code == "23505" && !e.fromSubmitBatch()
	case ErrForbidden:
		return e.Code == "42501" || e.isPolicyRefusal()
	case ErrPolicyRefused:
		return e.isPolicyRefusal()
	case ErrConflict:
		return e.Code == "55000" || (e.Code == "23505" && e.fromSubmitBatch())
	}
	return false
}

func (e *EnqueueError) isPolicyRefusal() bool { return e.Code == "P0001" && e.Rule != "" }

func (e *EnqueueError) fromSubmitBatch() bool { return e.Function == submitBatchFunc }

// enqueueError types a PostgreSQL refusal that fn raises; any other error (a
// lost connection, an aborted transaction, a SQLSTATE fn does not raise) is
// returned as it is.
func enqueueError(fn string, err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return err
	}
	e := &EnqueueError{Function: fn, Code: pg.Code, Message: pg.Message, pg: pg}
	switch {
	case len(pg.Code) == 5 && pg.Code[:2] == "22", pg.Code == "23505", pg.Code == "42501":
	case fn == sendTxFunc && pg.Code == "55000":
	case fn == sendTxFunc && pg.Code == "P0001":
		// A policy refusal's DETAIL is the refusal as HTTP's 403 has it;
		// a DETAIL that is not leaves Rule empty, and no sentinel matches.
		if json.Unmarshal([]byte(pg.Detail), &e.Refusal) != nil {
			e.Refusal = Refusal{}
		}
	default:
		return err
	}
	return e
}

func decimal(v *big.Int, zero string) string {
	if v == nil {
		return zero
	}
	return v.String()
}

func decimalOrNull(v *big.Int) any {
	if v == nil {
		return nil
	}
	return v.String()
}

// dataOrNull is no data as NULL, send_tx's default (empty data, or the
// call's encoding).
func dataOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt64(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}
