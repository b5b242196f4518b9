package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Every list pages by keyset, as the API does: a page's last row is the
// next page's cursor, in the query string; one row more than a page is
// read to know whether there is a next page.

var (
	uuidPattern    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	addressPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
)

// search sends a query to the page of what it names: a batch id (or
// Sawtooth batch id), a task id, a wallet name or address, a pool sender, a
// service id.
func (c *Console) search(ec echo.Context) error {
	q := strings.TrimSpace(ec.QueryParam("q"))
	if q == "" {
		return ec.Redirect(http.StatusSeeOther, Prefix+"/")
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	found := func(path string) error { return ec.Redirect(http.StatusSeeOther, Prefix+path) }
	if _, err := c.store.BatchGet(ctx, q); err == nil {
		return found("/batches/" + pathEscape(q))
	} else if !errors.Is(err, store.ErrNotFound) {
		return c.storeFail(ec, "the search", err)
	}
	if _, ok := c.walletByID(q); ok {
		return found("/wallets/" + pathEscape(q))
	}
	if uuidPattern.MatchString(q) {
		for _, w := range c.allWallets() {
			if _, err := c.store.TaskGet(ctx, w.ID, q); err == nil {
				return found("/wallets/" + pathEscape(w.ID) + "/tasks/" + q)
			}
		}
	}
	if addressPattern.MatchString(q) {
		for _, w := range c.allWallets() {
			if strings.EqualFold(w.Address().Hex(), q) {
				return found("/wallets/" + pathEscape(w.ID))
			}
		}
		return found("/pool/" + strings.ToLower(q))
	}
	if batches, err := c.store.BatchListInOrder(ctx, store.BatchListInOrderParams{ServiceID: q, Limit: 1}); err == nil && len(batches) > 0 {
		return found("/batches?service=" + queryEscape(q))
	} else if err != nil {
		return c.storeFail(ec, "the search", err)
	}
	return c.render(ec, http.StatusNotFound, "search.html", page{Title: "Search", Data: q,
		Error: "Nothing matches “" + q + "”."})
}

func (c *Console) allWallets() []keystore.Wallet {
	if c.wallets == nil {
		return nil
	}
	return c.wallets.All()
}

func (c *Console) walletByID(id string) (keystore.Wallet, bool) {
	if c.wallets == nil {
		return keystore.Wallet{}, false
	}
	return c.wallets.ByID(id)
}

type batchesData struct {
	Service string
	Batches []store.Batch
	Next    string
}

// batches lists a service's batches in the order they are sent.
func (c *Console) batches(ec echo.Context) error {
	service := strings.TrimSpace(ec.QueryParam("service"))
	data := batchesData{Service: service}
	if service == "" {
		return c.render(ec, http.StatusOK, "batches.html", page{Title: "Batches", Nav: "batches", Data: data})
	}
	p := store.BatchListInOrderParams{ServiceID: service, Limit: c.cfg.PageSize + 1, AfterID: ec.QueryParam("after_id")}
	if s := ec.QueryParam("after_created_at"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return c.fail(ec, http.StatusBadRequest, "after_created_at is not an RFC 3339 time; follow the Next link instead of writing it.")
		}
		p.AfterCreatedAt = t
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	rows, err := c.store.BatchListInOrder(ctx, p)
	if err != nil {
		return c.storeFail(ec, "the batches of service "+service, err)
	}
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		last := rows[len(rows)-1]
		data.Next = "?service=" + queryEscape(service) + "&after_created_at=" + queryEscape(last.CreatedAt.Format(time.RFC3339Nano)) + "&after_id=" + queryEscape(last.ID)
	}
	data.Batches = rows
	return c.render(ec, http.StatusOK, "batches.html", page{Title: "Batches of " + service, Nav: "batches", Data: data})
}

func (c *Console) batch(ec echo.Context) error {
	id := ec.Param("id")
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	b, err := c.store.BatchGet(ctx, id)
	if err != nil {
		return c.storeFail(ec, "Batch "+id, err)
	}
	return c.render(ec, http.StatusOK, "batch.html", page{Title: "Batch " + shortID(id), Nav: "batches", Data: b})
}

// walletView is a wallet with what the database knows of it.
type walletView struct {
	Name    string
	ChainID int64
	Address string
	// Health is nil before confirm first read the wallet's chain.
	Health *store.WalletHealth
	// NextNonce is the nonce its next task gets (nil: none assigned yet).
	NextNonce *int64
	// Backend is the wallet's signer's backend; Signer its state as
	// recorded (State empty: no signature recorded yet).
	Backend string
	Signer  store.SignerHealth
	// Sending says whether the wallet sends, and if not why.
	Sending store.WalletStatus
}

func (c *Console) walletView(ec echo.Context, w keystore.Wallet) (walletView, error) {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	v := walletView{Name: w.ID, ChainID: w.ChainID, Address: w.Address().Hex(), Backend: keystore.BackendOf(w.Signer)}
	h, err := c.store.WalletHealthGet(ctx, w.ChainID, v.Address)
	switch {
	case err == nil:
		v.Health = &h
		v.Signer = h.SignerOf(v.Backend)
	case !errors.Is(err, store.ErrNotFound):
		return v, err
	}
	v.Sending = store.StatusOf(v.Health, v.Backend)
	n, err := c.store.WalletNonceGet(ctx, w.ChainID, v.Address)
	switch {
	case err == nil:
		v.NextNonce = &n
	case !errors.Is(err, store.ErrNotFound):
		return v, err
	}
	return v, nil
}

func (c *Console) walletList(ec echo.Context) error {
	var out []walletView
	for _, w := range c.allWallets() {
		v, err := c.walletView(ec, w)
		if err != nil {
			return c.storeFail(ec, "wallet "+w.ID, err)
		}
		out = append(out, v)
	}
	return c.render(ec, http.StatusOK, "wallets.html", page{Title: "Wallets", Nav: "wallets", Data: out})
}

// wallet404 returns the wallet the path names. For a wallet this server
// does not send for it answers 404 and returns the zero wallet (ID "") with
// what answering returned: callers stop on an error or an empty ID.
func (c *Console) wallet404(ec echo.Context) (keystore.Wallet, error) {
	w, ok := c.walletByID(ec.Param("wallet"))
	if !ok {
		return w, c.fail(ec, http.StatusNotFound, "Wallet “"+ec.Param("wallet")+"” is not one this server sends for. The Wallets page lists those it has.")
	}
	return w, nil
}

type walletData struct {
	walletView
	// Policy is the wallet's policy, nil when it has none.
	Policy   *policyView
	InFlight []store.Attempt
	Tasks    []store.Task
	Status   string
	Statuses []string
	Next     string
}

func (c *Console) wallet(ec echo.Context) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	v, err := c.walletView(ec, w)
	if err != nil {
		return c.storeFail(ec, "wallet "+w.ID, err)
	}
	data := walletData{walletView: v, Statuses: []string{"Waiting", "Executing", "Done", "Error"}}
	p := store.TaskListParams{Wallet: w.ID, After: ec.QueryParam("after"), Limit: c.cfg.PageSize + 1}
	if s := ec.QueryParam("status"); s != "" {
		st, ok := parseTaskStatus(s)
		if !ok {
			return c.fail(ec, http.StatusBadRequest, "status must be Waiting, Executing, Done or Error.")
		}
		p.Status, data.Status = &st, s
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	if data.Policy, err = c.policyView(ctx, w); err != nil {
		return c.storeFail(ec, "the policy of wallet "+w.ID, err)
	}
	if data.InFlight, err = c.store.AttemptListInFlight(ctx, w.ChainID, v.Address, 100); err != nil {
		return c.storeFail(ec, "the attempts of wallet "+w.ID, err)
	}
	tasks, err := c.store.TaskList(ctx, p)
	if err != nil {
		return c.storeFail(ec, "the tasks of wallet "+w.ID, err)
	}
	if len(tasks) > c.cfg.PageSize {
		tasks = tasks[:c.cfg.PageSize]
		data.Next = "?after=" + queryEscape(tasks[len(tasks)-1].ID)
		if data.Status != "" {
			data.Next += "&status=" + queryEscape(data.Status)
		}
	}
	data.Tasks = tasks
	return c.render(ec, http.StatusOK, "wallet.html", page{Title: "Wallet " + w.ID, Nav: "wallets", Data: data})
}

// policyView is a wallet's policy as its page shows it: the rules, each
// cap's use now, and the latest refusals.
type policyView struct {
	Stored   store.StoredPolicy
	Spec     policy.Spec
	Value    []store.PolicySpend
	Fees     []store.PolicySpend
	Refusals []store.PolicyRefusal
}

// policyView reads w's policy; nil when it has none.
func (c *Console) policyView(ctx context.Context, w keystore.Wallet) (*policyView, error) {
	p, err := c.store.WalletPolicyGet(ctx, w.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	v := &policyView{Stored: p, Spec: policy.FromStore(p.Policy)}
	if v.Value, v.Fees, err = c.store.WalletPolicySpend(ctx, store.WalletPolicySpendParams{
		Now: c.clock.Now(), Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex(), Policy: p.Policy,
	}); err != nil {
		return nil, err
	}
	if v.Refusals, err = c.store.WalletPolicyRefusals(ctx, w.ID, 10); err != nil {
		return nil, err
	}
	return v, nil
}

func parseTaskStatus(s string) (store.TaskStatus, bool) {
	for _, st := range []store.TaskStatus{store.TaskWaiting, store.TaskExecuting, store.TaskError, store.TaskDone} {
		if strings.EqualFold(st.String(), s) {
			return st, true
		}
	}
	return 0, false
}

type taskData struct {
	Task     store.Task
	Attempts []store.Attempt
	// Head is the chain's head as confirm last read it (confirmations).
	Head *int64
	// SpeedUp is the speed-up form, nil when the task cannot be sped up.
	SpeedUp *speedUpForm
	// Revert and Logs are the task's, read from their JSON; nil: none (or
	// not readable).
	Revert *calldata.Revert
	Logs   *calldata.Logs
}

// outcomeOf reads a task's revert and logs for its page.
func outcomeOf(t store.Task) (*calldata.Revert, *calldata.Logs) {
	var rev *calldata.Revert
	if len(t.Revert) > 0 {
		var r calldata.Revert
		if json.Unmarshal(t.Revert, &r) == nil {
			rev = &r
		}
	}
	var logs *calldata.Logs
	if len(t.Logs) > 0 {
		var l calldata.Logs
		if json.Unmarshal(t.Logs, &l) == nil {
			logs = &l
		}
	}
	return rev, logs
}

// task404 returns the wallet and the task the path names, read with ctx.
// Without ok the page has answered (no such wallet or task, or a failed
// read), and err is what answering returned.
func (c *Console) task404(ctx context.Context, ec echo.Context) (w keystore.Wallet, t store.Task, ok bool, err error) {
	w, err = c.wallet404(ec)
	if err != nil || w.ID == "" {
		return w, t, false, err
	}
	id := ec.Param("id")
	t, err = c.store.TaskGet(ctx, w.ID, id)
	if err != nil {
		return w, t, false, c.storeFail(ec, "Task "+id+" of wallet "+w.ID, err)
	}
	return w, t, true, nil
}

func (c *Console) task(ec echo.Context) error {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	return c.renderTask(ctx, ec, w.ID, http.StatusOK, nil, "")
}

// renderTask writes the task's page with status: the task, its attempts
// and the head their confirmations are counted from, of one moment, and
// the speed-up form, filled with typed when a POST of it is refused for
// problem.
func (c *Console) renderTask(ctx context.Context, ec echo.Context, wallet string, status int, typed *speedUpForm, problem string) error {
	id := ec.Param("id")
	v, err := c.store.TaskView(ctx, wallet, id)
	if err != nil {
		return c.storeFail(ec, "Task "+id+" of wallet "+wallet, err)
	}
	data := taskData{Task: v.Task, Attempts: v.Attempts, SpeedUp: speedUpFormOf(v.Task, v.Attempts)}
	data.Revert, data.Logs = outcomeOf(v.Task)
	if v.Health != nil {
		data.Head = v.Health.ChainHead
	}
	if data.SpeedUp != nil && typed != nil {
		data.SpeedUp.MaxFee, data.SpeedUp.Tip = typed.MaxFee, typed.Tip
	}
	return c.render(ec, status, "task.html", page{Title: "Task " + shortID(id), Nav: "wallets", Data: data, Error: problem})
}

type webhooksData struct {
	Wallet    string
	Endpoints []store.WebhookEndpoint
}

func (c *Console) webhooks(ec echo.Context) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	eps, err := c.store.WebhookEndpointList(ctx, w.ID)
	if err != nil {
		return c.storeFail(ec, "the webhook endpoints of wallet "+w.ID, err)
	}
	return c.render(ec, http.StatusOK, "webhooks.html", page{Title: "Webhooks of " + w.ID, Nav: "wallets", Data: webhooksData{Wallet: w.ID, Endpoints: eps}})
}

// endpointOf returns the wallet's endpoint id: one of another wallet is not
// found, as in the API.
func (c *Console) endpointOf(ec echo.Context, wallet, id string) (store.WebhookEndpoint, error) {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	eps, err := c.store.WebhookEndpointList(ctx, wallet)
	if err != nil {
		return store.WebhookEndpoint{}, err
	}
	for _, e := range eps {
		if e.ID == id {
			return e, nil
		}
	}
	return store.WebhookEndpoint{}, store.ErrNotFound
}

type endpointData struct {
	Wallet     string
	Endpoint   store.WebhookEndpoint
	Deliveries []store.WebhookDeliveryState
	Next       string
}

func (c *Console) webhookEndpoint(ec echo.Context) error {
	w, err := c.wallet404(ec)
	if err != nil || w.ID == "" {
		return err
	}
	ep, err := c.endpointOf(ec, w.ID, ec.Param("endpoint"))
	if err != nil {
		return c.storeFail(ec, "Webhook endpoint "+ec.Param("endpoint")+" of wallet "+w.ID, err)
	}
	p := store.WebhookDeliveryListParams{EndpointID: ep.ID, BeforeID: ec.QueryParam("before_id"), Limit: c.cfg.PageSize + 1}
	if s := ec.QueryParam("before_created_at"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return c.fail(ec, http.StatusBadRequest, "before_created_at is not an RFC 3339 time; follow the Next link instead of writing it.")
		}
		p.BeforeCreatedAt = t
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	rows, err := c.store.WebhookDeliveryList(ctx, p)
	if err != nil {
		return c.storeFail(ec, "the deliveries of endpoint "+ep.ID, err)
	}
	data := endpointData{Wallet: w.ID, Endpoint: ep}
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		last := rows[len(rows)-1]
		data.Next = "?before_created_at=" + queryEscape(last.CreatedAt.Format(time.RFC3339Nano)) + "&before_id=" + queryEscape(last.ID)
	}
	data.Deliveries = rows
	return c.render(ec, http.StatusOK, "endpoint.html", page{Title: "Webhook endpoint " + ep.ID, Nav: "wallets", Data: data})
}

type poolData struct {
	Sender string
	Txs    []store.PoolTx
	Next   string
}

func (c *Console) poolSender(ec echo.Context) error {
	sender := strings.ToLower(ec.Param("sender"))
	if !addressPattern.MatchString(sender) {
		return c.fail(ec, http.StatusBadRequest, "A sender is an address: 0x and 40 hex digits.")
	}
	p := store.PoolTxListBySenderParams{Sender: sender, AfterNonce: -1, AfterHash: ec.QueryParam("after_hash"), Limit: c.cfg.PageSize + 1}
	if s := ec.QueryParam("after_nonce"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return c.fail(ec, http.StatusBadRequest, "after_nonce is not a number; follow the Next link instead of writing it.")
		}
		p.AfterNonce = n
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	rows, err := c.store.PoolTxListBySender(ctx, p)
	if err != nil {
		return c.storeFail(ec, "the pool transactions of "+sender, err)
	}
	data := poolData{Sender: sender}
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		last := rows[len(rows)-1]
		data.Next = "?after_nonce=" + strconv.FormatUint(last.Nonce, 10) + "&after_hash=" + queryEscape(last.Hash)
	}
	data.Txs = rows
	return c.render(ec, http.StatusOK, "pool.html", page{Title: "Sender " + shortID(sender), Nav: "builder", Data: data})
}

type bundlesData struct {
	ChainID int64
	Chain   bool
	State   string
	States  []string
	Bundles []store.Bundle
	Next    string
}

func (c *Console) bundles(ec echo.Context) error {
	data := bundlesData{ChainID: c.cfg.BuilderChainID, State: ec.QueryParam("state"),
		States: []string{"queued", "submitted", "guaranteed", "accumulated", "finalized", "dropped"}}
	if s := ec.QueryParam("chain"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return c.fail(ec, http.StatusBadRequest, "chain is a chain id: a number.")
		}
		data.ChainID = n
	}
	data.Chain = data.ChainID != 0
	if !data.Chain {
		return c.render(ec, http.StatusOK, "bundles.html", page{Title: "Bundles", Nav: "builder", Data: data})
	}
	p := store.BundleListParams{ChainID: data.ChainID, State: store.BundleState(data.State), Limit: c.cfg.PageSize + 1}
	if s := ec.QueryParam("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return c.fail(ec, http.StatusBadRequest, "after is a block number; follow the Next link instead of writing it.")
		}
		p.After = n
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	rows, err := c.store.BundleList(ctx, p)
	if err != nil {
		return c.storeFail(ec, "the bundles", err)
	}
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		data.Next = "?chain=" + strconv.FormatInt(data.ChainID, 10) + "&after=" + strconv.FormatUint(rows[len(rows)-1].Number, 10)
		if data.State != "" {
			data.Next += "&state=" + queryEscape(data.State)
		}
	}
	data.Bundles = rows
	return c.render(ec, http.StatusOK, "bundles.html", page{Title: "Bundles", Nav: "builder", Data: data})
}

type bundleData struct {
	Bundle   store.Bundle
	Versions []store.BundleVersion
	Txs      []string
}

func (c *Console) bundle(ec echo.Context) error {
	chainID, err1 := strconv.ParseInt(ec.Param("chain"), 10, 64)
	number, err2 := strconv.ParseUint(ec.Param("number"), 10, 64)
	if err1 != nil || err2 != nil {
		return c.fail(ec, http.StatusBadRequest, "A bundle is named by its chain id and block number, both numbers.")
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	b, err := c.store.BundleGet(ctx, chainID, number)
	if err != nil {
		return c.storeFail(ec, "Bundle "+ec.Param("number")+" of chain "+ec.Param("chain"), err)
	}
	data := bundleData{Bundle: b}
	if data.Versions, err = c.store.BundleVersionList(ctx, b.ID); err != nil {
		return c.storeFail(ec, "the versions of the bundle", err)
	}
	hashes, err := c.store.BundleTxListHashes(ctx, b.ID)
	if err != nil {
		return c.storeFail(ec, "the transactions of the bundle", err)
	}
	for _, h := range hashes {
		data.Txs = append(data.Txs, h.Hex())
	}
	return c.render(ec, http.StatusOK, "bundle.html", page{Title: "Bundle " + ec.Param("number"), Nav: "builder", Data: data})
}

type auditData struct {
	Entries []store.AuditRecord
	Next    string
}

func (c *Console) audit(ec echo.Context) error {
	var before int64
	if s := ec.QueryParam("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return c.fail(ec, http.StatusBadRequest, "before is an audit row's id; follow the Next link instead of writing it.")
		}
		before = n
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	rows, err := c.store.AuditList(ctx, before, c.cfg.PageSize+1)
	if err != nil {
		return c.storeFail(ec, "the audit", err)
	}
	data := auditData{}
	if len(rows) > c.cfg.PageSize {
		rows = rows[:c.cfg.PageSize]
		data.Next = "?before=" + strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	data.Entries = rows
	return c.render(ec, http.StatusOK, "audit.html", page{Title: "Audit", Nav: "audit", Data: data})
}
