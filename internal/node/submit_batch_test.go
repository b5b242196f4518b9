package node_test

// Submitting a batch inside the application's own transaction
// (ledgerq.submit_batch, issue 42): the batch exists if and only if the
// application's transaction commits, it is stored as POST /v1/batches
// stores it, and its signatures, which SQL cannot check, are checked by
// the submitter before it is sent. The batch lane runs in-process against
// the simulated ledger, whose own answers and event log judge what reached
// it.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store"
)

// submitBatchEnv is a batch-lane node on its own database and an
// application schema app.orders beside ledgerq's.
type submitBatchEnv struct {
	*batchLaneNode
	admin  *pgxpool.Pool
	signer *sawtooth.Signer
}

func setupSubmitBatch(t *testing.T) *submitBatchEnv {
	t.Helper()
	return setupSubmitBatchWith(t, nil)
}

func setupSubmitBatchWith(t *testing.T, mutate func(*node.Config)) *submitBatchEnv {
	t.Helper()
	b := openBatchLaneNodeWith(t, nil, mutate)
	admin, err := pgxpool.New(t.Context(), b.cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	_, err = admin.Exec(t.Context(), `CREATE SCHEMA app; CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text NOT NULL, batch_id text)`)
	require.NoError(t, err)
	signer, err := sawtooth.GenerateSigner()
	require.NoError(t, err)
	return &submitBatchEnv{batchLaneNode: b, admin: admin, signer: signer}
}

// role makes a login role for this test, granted ledgerq_enqueue and the
// use of app.orders, with services as its rows in
// ledgerq.enqueue_service_grants, and returns a pool connected as it.
func (e *submitBatchEnv) role(services ...string) *pgxpool.Pool {
	t := e.t
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "app_" + hex.EncodeToString(b[:])
	// A password, as a server that asks for one (CI's container, scram)
	// needs it; a server that trusts the connection ignores it.
	password := "pw_" + name
	ctx := t.Context()
	_, err := e.admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'; GRANT ledgerq_enqueue TO %[1]s; GRANT USAGE ON SCHEMA app TO %[1]s; GRANT SELECT, INSERT, UPDATE ON app.orders TO %[1]s`, name, password))
	require.NoError(t, err)
	for _, s := range services {
		_, err := e.admin.Exec(ctx, `INSERT INTO ledgerq.enqueue_service_grants (role_name, service_id) VALUES ($1, $2)`, name, s)
		require.NoError(t, err)
	}
	u, err := url.Parse(e.cfg.DatabaseURL)
	require.NoError(t, err)
	u.User = url.UserPassword(name, password)
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		_, _ = e.admin.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE %[1]s`, name))
	})
	return pool
}

// batch is a new signed batch: its id and serialized message.
func (e *submitBatchEnv) batch() (string, []byte) {
	e.t.Helper()
	id, payload, err := e.signer.NewBatch([]byte(e.t.Name()), []byte(time.Now().String()))
	require.NoError(e.t, err)
	return id, payload
}

// orderAndSubmit is the application's transaction: an order and its batch,
// submitted in the same transaction; commit or roll back.
func orderAndSubmit(ctx context.Context, pool *pgxpool.Pool, service string, payload []byte, commit bool) (string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id string
	if err := tx.QueryRow(ctx, `SELECT ledgerq.submit_batch($1, $2)`, service, payload).Scan(&id); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO app.orders (note, batch_id) VALUES ('order', $1)`, id); err != nil {
		return "", err
	}
	if !commit {
		return id, tx.Rollback(ctx)
	}
	return id, tx.Commit(ctx)
}

// ledgerSaw lists the simulated ledger's events about batch id.
func (e *submitBatchEnv) ledgerSaw(id string) []sim.EventKind {
	var kinds []sim.EventKind
	for _, ev := range e.ledger.Events() {
		if ev.BatchID == id {
			kinds = append(kinds, ev.Kind)
		}
	}
	return kinds
}

func (e *submitBatchEnv) storedRows(id string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.admin.QueryRow(e.t.Context(),
		`SELECT count(*) FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq WHERE p.id = $1`, id).Scan(&n))
	return n
}

// A batch submitted in a transaction that commits is committed by the
// ledger: the ledger's own status says so, and it accepted it once.
func TestSubmitBatch_CommittedTransactionIsCommittedByTheLedger(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("svc")
	want, payload := e.batch()
	id, err := orderAndSubmit(t.Context(), app, "svc", payload, true)
	require.NoError(t, err)
	require.Equal(t, want, id, "the id is the batch's header_signature")
	e.runLane(20)
	st, err := e.ledger.BatchStatuses(t.Context(), []string{id})
	require.NoError(t, err)
	require.Equal(t, ledger.BatchCommitted, st[id].Status, "the ledger's own status")
	require.Equal(t, []sim.EventKind{sim.EventAccepted, sim.EventCommitted}, e.ledgerSaw(id))
	require.Equal(t, store.BatchStatusCommitted, e.get(id).Status)
}

// A batch submitted in a transaction that rolls back leaves no row, and
// the ledger never hears of it.
func TestSubmitBatch_RolledBackTransactionLeavesNoRow(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("svc")
	_, payload := e.batch()
	id, err := orderAndSubmit(t.Context(), app, "svc", payload, false)
	require.NoError(t, err)
	require.Equal(t, 0, e.storedRows(id))
	e.runLane(5)
	require.Empty(t, e.ledgerSaw(id))
}

// A batch whose signature does not verify is stored through SQL (which
// cannot check it) and ends invalid with the reason, unsent; the next
// batch of its service goes on.
func TestSubmitBatch_BadSignatureEndsInvalidUnsent(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("svc")
	msg, err := e.signer.NewBatchMessage([]byte("tampered"))
	require.NoError(t, err)
	msg.Transactions[0].Payload = []byte("tampered after signing")
	bad, err := proto.Marshal(msg)
	require.NoError(t, err)
	badID, err := orderAndSubmit(t.Context(), app, "svc", bad, true)
	require.NoError(t, err)
	_, good := e.batch()
	goodID, err := orderAndSubmit(t.Context(), app, "svc", good, true)
	require.NoError(t, err)
	e.runLane(20)
	got := e.get(badID)
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Contains(t, got.LastError, "payload_sha512 does not match the payload")
	require.Empty(t, e.ledgerSaw(badID), "never sent to the ledger")
	require.Equal(t, store.BatchStatusCommitted, e.get(goodID).Status)
	require.Equal(t, []sim.EventKind{sim.EventAccepted, sim.EventCommitted}, e.ledgerSaw(goodID))
}

// A role granted ledgerq_enqueue but not the service is refused (42501),
// as is one granted nothing; '*' opens every service.
func TestSubmitBatch_ServiceScopingByRole(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	_, payload := e.batch()
	for _, c := range []struct {
		name     string
		services []string
		code     string
	}{
		{"another service", []string{"other"}, "42501"},
		{"no service", nil, "42501"},
		{"every service", []string{"*"}, ""},
	} {
		_, err := orderAndSubmit(t.Context(), e.role(c.services...), "svc", payload, true)
		require.Equal(t, c.code, pgCode(err), "%s: %v", c.name, err)
	}
}

// The same batch twice, through SQL or over HTTP, is one row and one id;
// the same id with another service is refused as HTTP's 409 is.
func TestSubmitBatch_SameBatchTwiceIsOneRow(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("*")
	_, payload := e.batch()
	first, err := orderAndSubmit(t.Context(), app, "svc", payload, true)
	require.NoError(t, err)
	second, err := orderAndSubmit(t.Context(), app, "svc", payload, true)
	require.NoError(t, err)
	require.Equal(t, first, second)
	code, msg := e.post(first, "svc", payload)
	require.Equal(t, http.StatusOK, code, msg)
	require.Equal(t, 1, e.storedRows(first))

	_, err = orderAndSubmit(t.Context(), app, "other", payload, true)
	require.Equal(t, "23505", pgCode(err), "%v", err)
	code, httpMsg := e.post(first, "other", payload)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, httpMsg, err.(*pgconn.PgError).Message, "the message of HTTP's 409")
	require.Equal(t, 1, e.storedRows(first))
}

// post posts one batch to POST /v1/batches with a service:* key and
// returns the status and message.
func (e *submitBatchEnv) post(id, service string, payload []byte) (int, string) {
	e.t.Helper()
	_, key, err := e.n.Store().APIKeyCreate(e.t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "t", Scopes: []store.Scope{store.ScopeAnyService}})
	require.NoError(e.t, err)
	body, err := json.Marshal(map[string]string{"id": id, "service_id": service, "payload": base64.StdEncoding.EncodeToString(payload)})
	require.NoError(e.t, err)
	req := httptest.NewRequest(http.MethodPost, "/v1/batches", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.n.Handler().ServeHTTP(rec, req)
	var out struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out.Message
}

// Every refusal SQL can make is HTTP's for the same input: the same field
// (payload over HTTP is batch in SQL) and the same words after it. The
// two differ on signatures only: SQL stores a batch whose signature fails
// and the submitter ends it invalid (the test above).
func TestSubmitBatch_RefusalsMatchHTTP(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("*")
	id, good := e.batch()
	msg := func(edit func(*sawtoothpb.Batch)) []byte {
		var b sawtoothpb.Batch
		require.NoError(t, proto.Unmarshal(good, &b))
		edit(&b)
		out, err := proto.Marshal(&b)
		require.NoError(t, err)
		return out
	}
	for _, c := range []struct {
		name    string
		service string
		payload []byte
		// words is what follows "field NAME: " in both; empty: both
		// refuse the field, in words of their own (a protobuf decoder's).
		field, words string
	}{
		{"no service", "", good, "service_id", "required"},
		{"service too long", strings.Repeat("é", 257), good, "service_id", "longer than 256 characters"},
		{"no payload", "svc", nil, "payload", "required"},
		{"payload too large", "svc", make([]byte, 1<<20+1), "payload", "larger than 1048576 bytes"},
		{"not protobuf", "svc", []byte{0xff, 0xff, 0xff}, "payload", ""},
		{"truncated", "svc", good[:len(good)-3], "payload", ""},
		{"no header_signature", "svc", msg(func(b *sawtoothpb.Batch) { b.HeaderSignature = "" }), "payload", "malformed batch: header_signature is missing"},
		{"upper-case header_signature", "svc", msg(func(b *sawtoothpb.Batch) { b.HeaderSignature = strings.ToUpper(b.HeaderSignature) }), "payload", "malformed batch: header_signature is not 128 lower case hex characters"},
		{"short header_signature", "svc", msg(func(b *sawtoothpb.Batch) { b.HeaderSignature = b.HeaderSignature[:64] }), "payload", "malformed batch: header_signature is not 128 lower case hex characters"},
		{"no header", "svc", msg(func(b *sawtoothpb.Batch) { b.Header = nil }), "payload", "malformed batch: header is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, httpMsg := e.post(id, c.service, c.payload)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, code, httpMsg)
			require.True(t, strings.HasPrefix(httpMsg, "field "+c.field+": "+c.words), "HTTP: %q", httpMsg)
			_, err := orderAndSubmit(t.Context(), app, c.service, c.payload, true)
			require.Equal(t, "22023", pgCode(err), "SQL: %v", err)
			sqlField := c.field
			if sqlField == "payload" {
				sqlField = "batch"
			}
			sqlMsg := err.(*pgconn.PgError).Message
			require.True(t, strings.HasPrefix(sqlMsg, "field "+sqlField+": "+c.words), "SQL: %q", sqlMsg)
			if c.words == "" && c.field == "payload" {
				require.True(t, strings.HasPrefix(httpMsg, "field payload: malformed batch: "), "HTTP: %q", httpMsg)
				require.True(t, strings.HasPrefix(sqlMsg, "field batch: malformed batch: "), "SQL: %q", sqlMsg)
			}
		})
	}
	// And what both take: the good batch.
	_, err := orderAndSubmit(t.Context(), app, "svc", good, true)
	require.NoError(t, err)
	code, httpMsg := e.post(id, "svc", good)
	require.Equal(t, http.StatusOK, code, httpMsg)
}

// A batch submitted through SQL wakes the batch submitters, on the lane's
// channel, when the application's transaction commits, and not before: a
// submitter in any process starts on it as on one posted over HTTP.
func TestSubmitBatch_CommitWakesTheSubmitters(t *testing.T) {
	t.Parallel()
	e := setupSubmitBatch(t)
	app := e.role("svc")
	listen, err := pgx.Connect(t.Context(), e.cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listen.Close(context.Background()) })
	_, err = listen.Exec(t.Context(), `LISTEN `+notify.BatchSubmitter)
	require.NoError(t, err)

	_, payload := e.batch()
	tx, err := app.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	var id string
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT ledgerq.submit_batch('svc', $1)`, payload).Scan(&id))
	early, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = listen.WaitForNotification(early)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "notified before the commit")
	require.NoError(t, tx.Commit(t.Context()))
	wait, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(wait)
	require.NoError(t, err)
	require.Equal(t, notify.BatchSubmitter, n.Channel)
	require.NotNil(t, e.get(id).QueuedAt, "admitted in the application's transaction")
}

// The size bound is the serving process's --api-max-payload-bytes, which
// it writes for SQL at start: a batch of the bound's size is taken by both
// paths, one a byte larger is refused by both with the same words.
func TestSubmitBatch_PayloadBoundIsTheServers(t *testing.T) {
	t.Parallel()
	const bound = 2000
	e := setupSubmitBatchWith(t, func(c *node.Config) { c.API.MaxPayloadBytes = bound })
	app := e.role("*")
	// sized signs batches until one is exactly n bytes long.
	sized := func(n int) (string, []byte) {
		k := n
		for range 10 {
			id, payload, err := e.signer.NewBatch(make([]byte, k))
			require.NoError(t, err)
			if len(payload) == n {
				return id, payload
			}
			k += n - len(payload)
		}
		t.Fatalf("no batch of %d bytes", n)
		return "", nil
	}
	id, over := sized(bound + 1)
	code, httpMsg := e.post(id, "svc", over)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, httpMsg)
	require.Equal(t, fmt.Sprintf("field payload: larger than %d bytes", bound), httpMsg)
	_, err := orderAndSubmit(t.Context(), app, "svc", over, true)
	require.Equal(t, "22023", pgCode(err), "%v", err)
	require.Equal(t, fmt.Sprintf("field batch: larger than %d bytes", bound), err.(*pgconn.PgError).Message)

	id, at := sized(bound)
	code, httpMsg = e.post(id, "svc", at)
	require.Equal(t, http.StatusCreated, code, httpMsg)
	_, at2 := sized(bound)
	_, err = orderAndSubmit(t.Context(), app, "svc", at2, true)
	require.NoError(t, err)
}
