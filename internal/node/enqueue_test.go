package node_test

// Enqueue inside the application's own transaction (ledgerq.send_tx, issue
// 42): the task exists if and only if the application's transaction
// commits, and it is validated as POST /v1/wallets/{wallet}/send-tx
// validates it. The application is a login role granted ledgerq_enqueue,
// with its own table app.orders in the same database, as docs/enqueue.md
// sets it up.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// enqueueEnv is a database with ledgerq's schema, a simulated chain with
// wallet "w" (1000 ether), and an application: the login role app, granted
// ledgerq_enqueue and wallet "w", owning app.orders.
type enqueueEnv struct {
	t      *testing.T
	dbURL  string
	admin  *pgxpool.Pool
	chain  *evmsim.Ledger
	reg    *keystore.Registry
	sender common.Address
	mutate func(*node.Config)
}

func setupEnqueue(t *testing.T, mutate func(*node.Config)) *enqueueEnv {
	t.Helper()
	db := testdb.New(t)
	signer := testfactory.NewSigner(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: 1337, Signer: signer})
	require.NoError(t, err)
	sender := common.Address(signer.Address())
	chain := evmsim.New(evmsim.Config{ChainID: 1337, BlockPeriod: 100 * time.Millisecond,
		Alloc: map[common.Address]*big.Int{sender: new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))}})
	admin, err := pgxpool.New(t.Context(), db.URL)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	_, err = admin.Exec(t.Context(), `CREATE SCHEMA app; CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text NOT NULL, task_id text)`)
	require.NoError(t, err)
	return &enqueueEnv{t: t, dbURL: db.URL, admin: admin, chain: chain, reg: reg, sender: sender, mutate: mutate}
}

// role makes a login role for this test, member of the given roles, with
// the use of app.orders, and returns a pool connected as it. wallets are
// its rows in ledgerq.enqueue_grants.
func (e *enqueueEnv) role(memberOf []string, wallets ...string) *pgxpool.Pool {
	e.t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "app_" + hex.EncodeToString(b[:])
	// A password, as a server that asks for one (CI's container, scram)
	// needs it; a server that trusts the connection ignores it.
	password := "pw_" + name
	ctx := e.t.Context()
	_, err := e.admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'; GRANT USAGE ON SCHEMA app TO %[1]s; GRANT SELECT, INSERT, UPDATE ON app.orders TO %[1]s`, name, password))
	require.NoError(e.t, err)
	for _, m := range memberOf {
		_, err := e.admin.Exec(ctx, fmt.Sprintf(`GRANT %s TO %s`, m, name))
		require.NoError(e.t, err)
	}
	for _, w := range wallets {
		_, err := e.admin.Exec(ctx, `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES ($1, $2)`, name, w)
		require.NoError(e.t, err)
	}
	u, err := url.Parse(e.dbURL)
	require.NoError(e.t, err)
	u.User = url.UserPassword(name, password)
	cfg, err := pgxpool.ParseConfig(u.String())
	require.NoError(e.t, err)
	cfg.MaxConns = 110
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		pool.Close()
		// A role is the cluster's: it goes with the test.
		_, _ = e.admin.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE %[1]s`, name))
	})
	return pool
}

// app is a role granted ledgerq_enqueue and wallet "w".
func (e *enqueueEnv) app() *pgxpool.Pool { return e.role([]string{"ledgerq_enqueue"}, "w") }

// serve starts a node with the API and every loop on the env's database
// and chain (the wallet lane runs in this process), and returns it with a
// client of its API holding a key for wallet "w".
func (e *enqueueEnv) serve() (*node.Node, *walletAPI) {
	t := e.t
	t.Helper()
	cfg := node.Defaults()
	cfg.DatabaseURL = e.dbURL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Loops.PollInterval = 100 * time.Millisecond
	cfg.Wallet.Registry = e.reg
	cfg.Wallet.Ledger.Instance = e.chain
	cfg.Wallet.Lane.FollowInterval = 100 * time.Millisecond
	cfg.Wallet.Shards.Backoff = 100 * time.Millisecond
	cfg.API.TaskMaxWait = 0
	if e.mutate != nil {
		e.mutate(&cfg)
	}
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	_, apiKey, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "test", Scopes: store.WalletScopes("w")})
	require.NoError(t, err)
	return n, &walletAPI{t: t, url: srv.URL, key: apiKey, chain: e.chain, st: n.Store(), addr: e.sender}
}

// orderAndSend is the application's transaction: an order and its
// payment, enqueued in the same transaction; commit or roll back.
func orderAndSend(ctx context.Context, pool *pgxpool.Pool, note string, commit bool, sendArgs string, args ...any) (string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var orderID int64
	if err := tx.QueryRow(ctx, `INSERT INTO app.orders (note) VALUES ($1) RETURNING id`, note).Scan(&orderID); err != nil {
		return "", err
	}
	var taskID string
	if err := tx.QueryRow(ctx, `SELECT ledgerq.send_tx(`+sendArgs+`)`, args...).Scan(&taskID); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE app.orders SET task_id = $1 WHERE id = $2`, taskID, orderID); err != nil {
		return "", err
	}
	if !commit {
		return taskID, tx.Rollback(ctx)
	}
	return taskID, tx.Commit(ctx)
}

// sentTo lists the chain's transactions from the wallet to addr, block by
// block: what the chain holds, whatever ledgerq's rows say.
func (e *enqueueEnv) sentTo(addr common.Address) []string {
	e.t.Helper()
	var hashes []string
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	for n := uint64(0); n <= e.chain.Head().Number; n++ {
		for _, tx := range e.chain.TransactionsIn(n) {
			from, err := signer.Sender(tx)
			require.NoError(e.t, err)
			if from == e.sender && tx.To() != nil && *tx.To() == addr {
				hashes = append(hashes, tx.Hash().Hex())
			}
		}
	}
	return hashes
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// An order committed with its payment enqueued in its transaction: the
// payment is mined once, read from the chain's blocks, and its task is the
// one REST shows.
func TestEnqueue_CommittedTransactionIsMinedOnce(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	_, api := e.serve()
	app := e.app()
	bob := common.HexToAddress("0x00000000000000000000000000000000000b0b42")

	id, err := orderAndSend(t.Context(), app, "order 1", true, `'w', $1, 12345, idempotency_key => 'order-1'`, strings.ToLower(bob.Hex()))
	require.NoError(t, err)
	got := api.ended(id)
	require.Equal(t, "done", got.Status, got.Error)

	bal, err := e.chain.BalanceAt(t.Context(), ledger.Address(bob))
	require.NoError(t, err)
	require.Equal(t, big.NewInt(12345), bal)
	sent := e.sentTo(bob)
	require.Len(t, sent, 1, "one transaction to bob in the chain's blocks")
	require.True(t, strings.EqualFold(got.TxHash, sent[0]))
	nonce, err := e.chain.NonceAt(t.Context(), ledger.Address(e.sender))
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce)

	var task string
	require.NoError(t, app.QueryRow(t.Context(), `SELECT task_id FROM app.orders WHERE note = 'order 1'`).Scan(&task))
	require.Equal(t, id, task)
}

// An order rolled back takes its payment with it: no task, no order,
// nothing on the chain, while a payment committed after it is mined.
func TestEnqueue_RolledBackTransactionSendsNothing(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	_, api := e.serve()
	app := e.app()
	bob := common.HexToAddress("0x00000000000000000000000000000000000b0b43")
	carol := common.HexToAddress("0x00000000000000000000000000000000000ca243")

	rolledBack, err := orderAndSend(t.Context(), app, "order 1", false, `'w', $1, 777`, strings.ToLower(bob.Hex()))
	require.NoError(t, err)
	require.NotEmpty(t, rolledBack)
	// The lane runs: a payment committed next is mined, and the chain then
	// shows what the lane sent.
	id, err := orderAndSend(t.Context(), app, "order 2", true, `'w', $1, 888`, strings.ToLower(carol.Hex()))
	require.NoError(t, err)
	require.Equal(t, "done", api.ended(id).Status)

	var tasks, orders int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM ledgerq.wallet_tasks), (SELECT count(*) FROM app.orders)`).Scan(&tasks, &orders))
	require.Equal(t, 1, tasks)
	require.Equal(t, 1, orders)
	code, _ := api.do(http.MethodGet, "/v1/wallets/w/tasks/"+rolledBack, "")
	require.Equal(t, http.StatusNotFound, code)
	require.Empty(t, e.sentTo(bob), "nothing sent to bob")
	require.Len(t, e.sentTo(carol), 1)
	nonce, err := e.chain.NonceAt(t.Context(), ledger.Address(e.sender))
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce)
}

// 100 application transactions at once under one idempotency key store one
// task, which every one of them is answered with, and it is sent once.
func TestEnqueue_ConcurrentTransactionsWithOneKeyMakeOneTask(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	_, api := e.serve()
	app := e.app()
	bob := common.HexToAddress("0x00000000000000000000000000000000000b0b44")

	const n = 100
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			ids[i], errs[i] = orderAndSend(t.Context(), app, fmt.Sprintf("order %d", i), true, `'w', $1, 5, idempotency_key => 'one-payment'`, strings.ToLower(bob.Hex()))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "transaction %d", i)
		require.Equal(t, ids[0], ids[i], "transaction %d", i)
	}
	var tasks, orders int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM ledgerq.wallet_tasks), (SELECT count(*) FROM app.orders)`).Scan(&tasks, &orders))
	require.Equal(t, 1, tasks)
	require.Equal(t, n, orders)
	require.Equal(t, "done", api.ended(ids[0]).Status)
	require.Len(t, e.sentTo(bob), 1)
}

// The enqueue role reads and changes none of ledgerq's tables and views:
// every one refuses SELECT, and a write too.
func TestEnqueue_RoleCannotSelectAnyTable(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	e.serve()
	app := e.app()
	rows, err := e.admin.Query(t.Context(), `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'ledgerq' AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, names, "wallet_tasks")
	require.Contains(t, names, "enqueue_grants")
	for _, name := range names {
		_, err := app.Exec(t.Context(), `SELECT 1 FROM ledgerq.`+name+` LIMIT 1`)
		require.Equal(t, "42501", pgCode(err), "SELECT on ledgerq.%s: %v", name, err)
	}
	_, err = app.Exec(t.Context(), `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES (session_user, '*')`)
	require.Equal(t, "42501", pgCode(err), "a grant written by the role itself: %v", err)
	_, err = app.Exec(t.Context(), `DELETE FROM ledgerq.wallet_tasks WHERE true`)
	require.Equal(t, "42501", pgCode(err), "%v", err)
	// And its function is send_tx alone: the policy function, executable
	// by PUBLIC, reads tables the caller may not.
	_, err = app.Exec(t.Context(), `SELECT ledgerq.wallet_policy_refusal('w', 1337, '0x0', '0x0', 0, '\x', NULL, now())`)
	require.Equal(t, "42501", pgCode(err), "%v", err)
}

// Wallet scoping: the login role (session_user), or a role it is a member
// of, must be granted the wallet in ledgerq.enqueue_grants; SET ROLE
// neither gives nor takes a wallet.
func TestEnqueue_WalletScopingByRole(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	e.serve()
	to := "0x00000000000000000000000000000000000b0b45"
	send := func(pool *pgxpool.Pool, setRole string) error {
		tx, err := pool.Begin(t.Context())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		if setRole != "" {
			_, err := tx.Exec(t.Context(), `SET LOCAL ROLE `+setRole)
			require.NoError(t, err)
		}
		var id string
		return tx.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1)`, to).Scan(&id)
	}
	granted := e.app()
	ungranted := e.role([]string{"ledgerq_enqueue"})
	other := e.role([]string{"ledgerq_enqueue"}, "other-wallet")
	everything := e.role([]string{"ledgerq_enqueue"}, "*")
	_, err := e.admin.Exec(t.Context(), `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app_payments_group') THEN CREATE ROLE app_payments_group NOLOGIN; END IF; END $$`)
	require.NoError(t, err)
	_, err = e.admin.Exec(t.Context(), `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES ('app_payments_group', 'w')`)
	require.NoError(t, err)
	viaGroup := e.role([]string{"ledgerq_enqueue", "app_payments_group"})
	noRole := e.role(nil, "w")

	require.NoError(t, send(granted, ""))
	require.NoError(t, send(granted, "ledgerq_enqueue"), "SET ROLE keeps the login role's wallets")
	require.NoError(t, send(everything, ""))
	require.NoError(t, send(viaGroup, ""))
	for name, err := range map[string]error{
		"ungranted":                      send(ungranted, ""),
		"ungranted after SET ROLE":       send(ungranted, "ledgerq_enqueue"),
		"granted another wallet":         send(other, ""),
		"granted the wallet, not a role": send(noRole, ""),
	} {
		require.Error(t, err, name)
		require.Equal(t, "42501", pgCode(err), "%s: %v", name, err)
	}
	var unknown string
	err = granted.QueryRow(t.Context(), `SELECT ledgerq.send_tx('no-such-wallet', $1)`, to).Scan(&unknown)
	require.Equal(t, "42501", pgCode(err), "%v", err)
}

// A task committed while no serve runs (the process died between the
// application's commit and its pickup) is sent when one starts.
func TestEnqueue_TaskCommittedWhileNoServeRunsIsSent(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	first, _ := e.serve() // writes the wallet directory
	first.Stop()
	app := e.app()
	bob := common.HexToAddress("0x00000000000000000000000000000000000b0b46")
	id, err := orderAndSend(t.Context(), app, "order 1", true, `'w', $1, 4242`, strings.ToLower(bob.Hex()))
	require.NoError(t, err)
	var status int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT status FROM ledgerq.wallet_tasks WHERE id = $1`, id).Scan(&status))
	require.Equal(t, 0, status)
	require.Empty(t, e.sentTo(bob))

	_, api := e.serve()
	require.Equal(t, "done", api.ended(id).Status)
	require.Len(t, e.sentTo(bob), 1)
	bal, err := e.chain.BalanceAt(t.Context(), ledger.Address(bob))
	require.NoError(t, err)
	require.Equal(t, big.NewInt(4242), bal)
}

// One idempotency key over HTTP and over SQL: the same body is one task,
// another body is refused naming the key and the stored task.
func TestEnqueue_SameKeyOverHTTPAndSQLIsOneTask(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	_, api := e.serve()
	app := e.app()
	to := "0x00000000000000000000000000000000000B0B47"
	stored := postTask(t, api, `{"to":"`+to+`","value":"0x10","data":"0xabcd","gas_limit":50000,"max_fee_per_gas":"200000000000","priority":3,"preflight":false}`, "k-1")

	var id string
	err := app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, 16, '\xabcd', 'k-1', gas_limit => 50000, max_fee_per_gas => 200000000000, priority => 3, preflight => false)`, strings.ToLower(to)).Scan(&id)
	require.NoError(t, err)
	require.Equal(t, stored.ID, id)

	err = app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, 17, '\xabcd', 'k-1', gas_limit => 50000, max_fee_per_gas => 200000000000, priority => 3, preflight => false)`, to).Scan(&id)
	require.Equal(t, "23505", pgCode(err), "%v", err)
	require.ErrorContains(t, err, stored.ID)
	require.ErrorContains(t, err, "k-1")
	var tasks int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_tasks`).Scan(&tasks))
	require.Equal(t, 1, tasks)
}

// A contract call named by an ABI's method over HTTP and over SQL, under
// one key, with its arguments written differently (a number and a hex
// string for one integer, a checksummed and a lower-case address): one
// task, with the data and the call HTTP stored. Another argument is
// another request.
func TestEnqueue_SameKeyOverHTTPAndSQLWithACallIsOneTask(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	_, api := e.serve()
	app := e.app()
	token := "0x00000000000000000000000000000000000B0B47"
	bob := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	abiJSON := `[{"type":"function","name":"transfer","inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[{"name":"","type":"bool"}]}]`
	body := `{"to":"` + token + `","abi":` + abiJSON + `,"method":"transfer","args":["` + bob + `",4096],"preflight":false}`
	stored := postTask(t, api, body, "call-1")

	var id string
	err := app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, idempotency_key => 'call-1', preflight => false, abi => $2::json, method => 'transfer', args => $3::json)`,
		token, abiJSON, `["`+strings.ToLower(bob)+`","0x1000"]`).Scan(&id)
	require.NoError(t, err)
	require.Equal(t, stored.ID, id)

	err = app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, idempotency_key => 'call-1', preflight => false, abi => $2::json, method => 'transfer', args => $3::json)`,
		token, abiJSON, `["`+bob+`","4097"]`).Scan(&id)
	require.Equal(t, "23505", pgCode(err), "%v", err)

	// A task stored over SQL alone has what HTTP would have stored.
	var sqlID string
	require.NoError(t, app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, idempotency_key => 'call-2', function => 'transfer(address, uint)', args => $2::json)`,
		token, `["`+bob+`",4096]`).Scan(&sqlID))
	var data []byte
	var call string
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT data, call::text FROM ledgerq.wallet_tasks WHERE id = $1`, sqlID).Scan(&data, &call))
	require.Equal(t, "a9059cbb"+"0000000000000000000000005aaeb6053f3e94c9b9a09f33669435e7ef1beaed"+
		"0000000000000000000000000000000000000000000000000000000000001000", hex.EncodeToString(data))
	require.JSONEq(t, `{"function":"transfer(address,uint256)","args":["`+bob+`","4096"]}`, call)
	code, out := api.do(http.MethodGet, "/v1/wallets/w/tasks/"+sqlID, "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, out, `"function":"transfer(address,uint256)"`)
}

// postTask posts body as a fire-and-forget send-tx of wallet w under key
// and returns the task stored (202).
func postTask(t *testing.T, api *walletAPI, body, key string) apiTask {
	t.Helper()
	var r struct {
		Task apiTask `json:"task"`
	}
	code, err := postSendTask(t, api, body, key, &r)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	return r.Task
}

// postSendTask posts body as a fire-and-forget send-tx of wallet w under
// key, decodes the answer into out, and returns its status and the
// decoding's error.
func postSendTask(t *testing.T, api *walletAPI, body, key string, out any) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, api.url+"/v1/wallets/w/send-tx?task=true", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+api.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// ledgerq.keccak256 is Ethereum's Keccak-256 (the EIP-55 check's hash) at
// every length around the 136-byte block.
func TestEnqueue_Keccak256MatchesGoEthereum(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	for _, n := range []int{0, 1, 3, 32, 135, 136, 137, 271, 272, 273, 1000} {
		in := make([]byte, n)
		_, _ = rand.Read(in)
		var got []byte
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT ledgerq.keccak256($1)`, in).Scan(&got))
		require.Equal(t, crypto.Keccak256(in), got, "length %d", n)
	}
}

// verdict is what an intake answered a request: accepted, or refused naming
// a field ("" when the refusal names none).
type verdict struct {
	accepted bool
	field    string
}

func (v verdict) String() string {
	if v.accepted {
		return "accepted"
	}
	return "refused: field " + v.field
}

// enqueueCase is one request, as both intakes take it: the HTTP body's
// JSON fields and the SQL call's named arguments.
type enqueueCase struct {
	name string
	// json is the send-tx body after {"to":…}; sql the named arguments
	// after the wallet and the recipient.
	to   string
	json string
	sql  string
	key  string
	want verdict
}

// Every validation of the HTTP intake, for the fields SQL takes, has its
// SQL twin: each case runs through POST /v1/wallets/w/send-tx and through
// ledgerq.send_tx, and both give the same verdict. The fee ceiling is not
// the default, so the SQL side reads the one serve wrote at start.
func TestEnqueue_ValidationMatchesHTTP(t *testing.T) {
	t.Parallel()
	ceiling := big.NewInt(500_000_000_000)
	e := setupEnqueue(t, func(c *node.Config) { c.API.MaxFeePerGas = ceiling })
	_, api := e.serve()
	app := e.app()
	two256 := new(big.Int).Lsh(big.NewInt(1), 256)
	max256 := new(big.Int).Sub(two256, big.NewInt(1))
	lower := "0x00000000000000000000000000000000000b0b48"
	good := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	bad := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"
	big128 := strings.Repeat("ab", 128<<10)
	ok := verdict{accepted: true}
	refused := func(f string) verdict { return verdict{field: f} }
	cases := []enqueueCase{
		{name: "plain transfer", to: lower, want: ok},
		{name: "to empty", to: "", want: refused("to")},
		{name: "to short", to: "0x1234", want: refused("to")},
		{name: "to without 0x", to: "00" + lower[2:], want: refused("to")},
		{name: "to not hex", to: "0x" + strings.Repeat("g", 40), want: refused("to")},
		{name: "to upper case", to: "0x" + strings.ToUpper(good[2:]), want: ok},
		{name: "to checksummed", to: good, want: ok},
		{name: "to wrong checksum", to: bad, want: refused("to")},
		{name: "value zero", to: lower, json: `"value":"0"`, sql: `value => 0`, want: ok},
		{name: "value largest", to: lower, json: `"value":"` + max256.String() + `"`, sql: `value => ` + max256.String(), want: ok},
		{name: "value 2^256", to: lower, json: `"value":"` + two256.String() + `"`, sql: `value => ` + two256.String(), want: refused("value")},
		{name: "value negative", to: lower, json: `"value":"-1"`, sql: `value => -1`, want: refused("value")},
		{name: "value fractional", to: lower, json: `"value":"1.5"`, sql: `value => 1.5`, want: refused("value")},
		{name: "data", to: lower, json: `"data":"0xdeadbeef"`, sql: `data => '\xdeadbeef'`, want: ok},
		{name: "data largest", to: lower, json: `"data":"0x` + big128 + `"`, sql: `data => '\x` + big128 + `'`, want: ok},
		{name: "data too large", to: lower, json: `"data":"0x` + big128 + `00"`, sql: `data => '\x` + big128 + `00'`, want: refused("data")},
		{name: "gas limit lowest", to: lower, json: `"gas_limit":21000`, sql: `gas_limit => 21000`, want: ok},
		{name: "gas limit below a transfer", to: lower, json: `"gas_limit":20999`, sql: `gas_limit => 20999`, want: refused("gas_limit")},
		{name: "gas limit largest", to: lower, json: `"gas_limit":9007199254740991`, sql: `gas_limit => 9007199254740991`, want: ok},
		{name: "gas limit 2^53", to: lower, json: `"gas_limit":9007199254740992`, sql: `gas_limit => 9007199254740992`, want: refused("gas_limit")},
		{name: "gas limit zero", to: lower, json: `"gas_limit":0`, sql: `gas_limit => 0`, want: refused("gas_limit")},
		{name: "fee cap at the ceiling", to: lower, json: `"max_fee_per_gas":"500000000000"`, sql: `max_fee_per_gas => 500000000000`, want: ok},
		{name: "fee cap above the ceiling", to: lower, json: `"max_fee_per_gas":"500000000001"`, sql: `max_fee_per_gas => 500000000001`, want: refused("max_fee_per_gas")},
		{name: "tip above the ceiling", to: lower, json: `"max_priority_fee_per_gas":"500000000001"`, sql: `max_priority_fee_per_gas => 500000000001`, want: refused("max_priority_fee_per_gas")},
		{name: "tip negative", to: lower, json: `"max_priority_fee_per_gas":"-1"`, sql: `max_priority_fee_per_gas => -1`, want: refused("max_priority_fee_per_gas")},
		{name: "fee cap fractional", to: lower, json: `"max_fee_per_gas":"0.5"`, sql: `max_fee_per_gas => 0.5`, want: refused("max_fee_per_gas")},
		{name: "fee cap 2^256", to: lower, json: `"max_fee_per_gas":"` + two256.String() + `"`, sql: `max_fee_per_gas => ` + two256.String(), want: refused("max_fee_per_gas")},
		{name: "tip above fee cap", to: lower, json: `"max_fee_per_gas":"100","max_priority_fee_per_gas":"101"`, sql: `max_fee_per_gas => 100, max_priority_fee_per_gas => 101`, want: refused("max_fee_per_gas")},
		{name: "tip equal to fee cap", to: lower, json: `"max_fee_per_gas":"100","max_priority_fee_per_gas":"100"`, sql: `max_fee_per_gas => 100, max_priority_fee_per_gas => 100`, want: ok},
		{name: "both fees above the ceiling", to: lower, json: `"max_fee_per_gas":"600000000000","max_priority_fee_per_gas":"600000000000"`, sql: `max_fee_per_gas => 600000000000, max_priority_fee_per_gas => 600000000000`, want: refused("max_priority_fee_per_gas")},
		{name: "priority", to: lower, json: `"priority":-7`, sql: `priority => -7`, want: ok},
		{name: "no preflight", to: lower, json: `"preflight":false`, sql: `preflight => false`, want: ok},
		{name: "key longest", to: lower, key: strings.Repeat("k", 256), want: ok},
		{name: "key too long", to: lower, key: strings.Repeat("k", 257), want: refused("idempotency_key")},
		{name: "key not ASCII", to: lower, key: "clé", want: refused("idempotency_key")},
		{name: "call by signature", to: lower, json: `"function":"transfer(address,uint256)","args":["` + good + `","1"]`, sql: `function => 'transfer(address,uint256)', args => '["` + good + `","1"]'`, want: ok},
		{name: "call by abi", to: lower, json: `"abi":{"type":"function","name":"f","inputs":[{"name":"n","type":"uint8"}]},"method":"f","args":[7]`, sql: `abi => '{"type":"function","name":"f","inputs":[{"name":"n","type":"uint8"}]}', method => 'f', args => '[7]'`, want: ok},
		{name: "call argument out of range", to: lower, json: `"function":"f(address,uint8)","args":["` + good + `",256]`, sql: `function => 'f(address,uint8)', args => '["` + good + `",256]'`, want: refused("args[1]")},
		{name: "call argument by name", to: lower, json: `"abi":{"type":"function","name":"f","inputs":[{"name":"n","type":"uint8"}]},"method":"f","args":[-1]`, sql: `abi => '{"type":"function","name":"f","inputs":[{"name":"n","type":"uint8"}]}', method => 'f', args => '[-1]'`, want: refused("args[0] (n)")},
		{name: "call with data", to: lower, json: `"data":"0x","function":"f()"`, sql: `data => '\x', function => 'f()'`, want: refused("data")},
		{name: "call with too few arguments", to: lower, json: `"function":"f(uint8)","args":[]`, sql: `function => 'f(uint8)', args => '[]'`, want: refused("args")},
		{name: "call without function", to: lower, json: `"args":[]`, sql: `args => '[]'`, want: refused("function")},
		{name: "call with args null", to: lower, json: `"function":"f()","args":null`, sql: `function => 'f()', args => 'null'`, want: ok},
		{name: "method without abi", to: lower, json: `"method":"f"`, sql: `method => 'f'`, want: refused("abi")},
		{name: "unknown method", to: lower, json: `"abi":[],"method":"f"`, sql: `abi => '[]', method => 'f'`, want: refused("method")},
		{name: "bad signature", to: lower, json: `"function":"f(uint7)"`, sql: `function => 'f(uint7)'`, want: refused("function")},
		{name: "bad call before bad gas limit", to: lower, json: `"function":"f(uint7)","gas_limit":1`, sql: `function => 'f(uint7)', gas_limit => 1`, want: refused("function")},
		{name: "bad value before bad call", to: lower, json: `"value":"-1","function":"f(uint7)"`, sql: `value => -1, function => 'f(uint7)'`, want: refused("value")},
		{name: "bad to before bad value", to: "0x12", json: `"value":"-1"`, sql: `value => -1`, want: refused("to")},
		{name: "bad value before bad gas limit", to: lower, json: `"value":"-1","gas_limit":1`, sql: `value => -1, gas_limit => 1`, want: refused("value")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.key
			if key == "" {
				key = fmt.Sprintf("http-%d", i)
			}
			body := `{"to":"` + c.to + `"`
			if c.json != "" {
				body += "," + c.json
			}
			body += "}"
			httpGot := httpVerdict(t, api, body, key)
			sqlKey := c.key
			if sqlKey == "" {
				sqlKey = fmt.Sprintf("sql-%d", i)
			}
			args := `'w', $1, idempotency_key => $2`
			if c.sql != "" {
				args += ", " + c.sql
			}
			var id string
			err := app.QueryRow(t.Context(), `SELECT ledgerq.send_tx(`+args+`)`, c.to, sqlKey).Scan(&id)
			sqlGot := sqlVerdict(t, err)
			require.Equal(t, c.want, httpGot, "HTTP")
			require.Equal(t, c.want, sqlGot, "SQL: %v", err)
		})
	}
}

// httpVerdict posts body as a fire-and-forget send-tx under key.
func httpVerdict(t *testing.T, api *walletAPI, body, key string) verdict {
	t.Helper()
	var out struct {
		Error string `json:"message"`
	}
	code, _ := postSendTask(t, api, body, key, &out)
	switch code {
	case http.StatusAccepted, http.StatusOK:
		return verdict{accepted: true}
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		msg := out.Error
		if strings.HasPrefix(msg, "header Idempotency-Key:") {
			return verdict{field: "idempotency_key"}
		}
		f, _, found := strings.Cut(strings.TrimPrefix(msg, "field "), ":")
		require.True(t, found && strings.HasPrefix(msg, "field "), "a 400 that names no field: %q", msg)
		return verdict{field: f}
	}
	t.Fatalf("HTTP answered %d: %s", code, out.Error)
	return verdict{}
}

// sqlVerdict reads send_tx's answer: a refusal of a field is SQLSTATE 22023
// with a message "field NAME: …".
func sqlVerdict(t *testing.T, err error) verdict {
	t.Helper()
	if err == nil {
		return verdict{accepted: true}
	}
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22023", pgErr.Code, "%v", err)
	f, _, found := strings.Cut(strings.TrimPrefix(pgErr.Message, "field "), ":")
	require.True(t, found && strings.HasPrefix(pgErr.Message, "field "), "a refusal that names no field: %q", pgErr.Message)
	return verdict{field: f}
}

// A wallet's policy refuses over SQL what it refuses over HTTP, with the
// message of HTTP's 403 and the refusal as JSON in the DETAIL.
func TestEnqueue_PolicyRefusalMatchesHTTP(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, func(c *node.Config) {
		c.Wallet.Policies = policy.Decls{{Wallet: "w", Spec: policy.Spec{MaxValuePerTx: "1000"}}}
	})
	_, api := e.serve()
	app := e.app()
	to := "0x00000000000000000000000000000000000b0b49"
	code, out := api.do(http.MethodPost, "/v1/wallets/w/send-tx?task=true", `{"to":"`+to+`","value":"1001"}`)
	require.Equal(t, http.StatusForbidden, code, out)
	var httpErr struct {
		Error string `json:"message"`
		Rule  string `json:"rule"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &httpErr))

	var id string
	err := app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, 1001)`, to).Scan(&id)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "P0001", pgErr.Code)
	require.Equal(t, httpErr.Error, pgErr.Message)
	var detail struct {
		Rule  string `json:"rule"`
		Limit string `json:"limit"`
	}
	require.NoError(t, json.Unmarshal([]byte(pgErr.Detail), &detail), pgErr.Detail)
	require.Equal(t, httpErr.Rule, detail.Rule)
	require.Equal(t, "1000", detail.Limit)

	require.NoError(t, app.QueryRow(t.Context(), `SELECT ledgerq.send_tx('w', $1, 1000)`, to).Scan(&id))
	require.Equal(t, "done", api.ended(id).Status)
	assert.Len(t, e.sentTo(common.HexToAddress(to)), 1)
}

// The application's commit wakes the wallet's lane: with the follower and
// every poll an hour away, a task enqueued in SQL is sent as soon as its
// transaction commits (the shard scheduled in it, ledgerq_shards notified
// at the commit).
func TestEnqueue_CommitWakesTheLane(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, func(c *node.Config) {
		c.Loops.PollInterval = time.Hour
		c.Wallet.Lane.FollowInterval = time.Hour
		c.Wallet.Lane.HeadInterval = 0
		c.Wallet.Shards.PollInterval = time.Hour
	})
	e.serve()
	app := e.app()
	// Two in turn, each once the wallet's shard is idle: the first may
	// land before the workers' first round, the second finds them waiting
	// for their next poll, an hour away.
	for i, to := range []common.Address{
		common.HexToAddress("0x00000000000000000000000000000000000b0b4a"),
		common.HexToAddress("0x00000000000000000000000000000000000b0b4b"),
	} {
		id, err := orderAndSend(t.Context(), app, fmt.Sprintf("order %d", i), true, `'w', $1, 9`, strings.ToLower(to.Hex()))
		require.NoError(t, err)
		// Confirming it waits for the follower; sending it does not.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Len(c, e.sentTo(to), 1)
		}, 10*time.Second, 50*time.Millisecond, "task %s was not sent", id)
		// The wallet's run ends (nothing left to send, and no follower
		// brings it back to confirm): its shard is idle.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var state string
			assert.NoError(c, e.admin.QueryRow(t.Context(), `SELECT state::text FROM ledgerq.shards WHERE key = $1`,
				store.WalletShardKey(1337, strings.ToLower(e.sender.Hex()))).Scan(&state))
			assert.Equal(c, "idle", state)
		}, 10*time.Second, 50*time.Millisecond)
	}
}

// A wallet added at run time is in the wallet directory from the statement
// that adds it: send_tx takes it, refuses it disabled (55000, as HTTP's
// 409) and refuses it removed (42501, as an unknown wallet).
func TestEnqueue_RuntimeWalletsFollowTheWalletsTable(t *testing.T) {
	t.Parallel()
	e := setupEnqueue(t, nil)
	n, _ := e.serve()
	app := e.role([]string{"ledgerq_enqueue"}, "hot")
	st := n.Store()
	audit := &store.AuditEntry{KeyName: "ops", Via: "api"}
	_, err := st.WalletsAdd(t.Context(), store.WalletDecl{Name: "hot", Chain: "main", ChainID: 1337,
		Address: "0x00000000000000000000000000000000000a0a01", Backend: "clef", CreatedBy: "ops"}, time.Now(), audit)
	require.NoError(t, err)
	// send enqueues for "hot" and rolls back: the lane holds no key for it.
	send := func() error {
		_, err := orderAndSend(t.Context(), app, "order", false, `'hot', '0x00000000000000000000000000000000000b0b4c', 1`)
		return err
	}
	require.NoError(t, send())

	_, _, err = st.WalletsSetDisabled(t.Context(), "hot", true, time.Now(), audit)
	require.NoError(t, err)
	err = send()
	require.Equal(t, "55000", pgCode(err), "%v", err)
	require.ErrorContains(t, err, `wallet "hot" is disabled: it takes no new task`)

	_, _, err = st.WalletsSetDisabled(t.Context(), "hot", false, time.Now(), audit)
	require.NoError(t, err)
	require.NoError(t, send())

	require.NoError(t, st.WalletsRemove(t.Context(), "hot", time.Now(), audit))
	err = send()
	require.Equal(t, "42501", pgCode(err), "%v", err)
	dir, err := st.WalletDirectoryList(t.Context())
	require.NoError(t, err)
	require.Len(t, dir, 1)
	require.Equal(t, store.DirectoryWallet{Wallet: "w", ChainID: 1337, Sender: strings.ToLower(e.sender.Hex()), Source: "config"}, dir[0])
}
