package httpapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The wallet lane's routes: send-tx tasks, queued per wallet as the Hathor
// headless wallet's send-tx queue does, stored for the wallet's worker, which
// signs and sends them in queue order.

const (
	// maxTxData is the most call data a task carries (the table's
	// wallet_tasks_data_size).
	maxTxData = 128 << 10
	// maxIdempotencyKey is the longest Idempotency-Key (the table's
	// wallet_tasks_idempotency_key_size).
	maxIdempotencyKey = 256
	// taskPollFirst and taskPollMax pace a waiting send-tx's reads of its
	// task: often at first (a fast chain ends a task within a second), then
	// less. No NOTIFY says that a task ended.
	taskPollFirst = 50 * time.Millisecond
	taskPollMax   = 500 * time.Millisecond
)

var (
	hexAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	taskID     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// maxUint256 is 2^256 - 1.
	maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
)

// StopWaiting makes every request that waits for its task (send-tx without
// task=true) answer 202 with the task at once, and later ones not wait.
// Call it when the server starts to shut down (http.Server's
// RegisterOnShutdown), so that a restart answers the waiting clients
// instead of dropping them: a dropped client would read as one that went
// away, whose waiting task is cancelled. Safe to call more than once.
func (s *Server) StopWaiting() { s.stopWaitOnce.Do(func() { close(s.stopping) }) }

// SendTx answers POST /v1/wallets/{wallet}/send-tx: it stores a task (or
// finds the one stored under the Idempotency-Key) and, without task=true,
// waits for it to end.
func (s *Server) SendTx(c echo.Context, walletName string, params apigen.SendTxParams) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	fireAndForget, apiErr := parseTaskParam(params.Task)
	if apiErr != nil {
		return apiErr
	}
	key, apiErr := checkIdempotencyKey(params.IdempotencyKey)
	if apiErr != nil {
		return apiErr
	}
	var body apigen.SendTxRequest
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	req, apiErr := validateSendTx(body, s.cfg.MaxFeePerGas)
	if apiErr != nil {
		return apiErr
	}

	ctx := c.Request().Context()
	// The insert runs to its end even if the client goes away meanwhile:
	// then its task exists, and is cancelled below like any other.
	dctx, cancel := s.dbContext(context.WithoutCancel(ctx))
	task, created, err := s.store.TaskInsert(dctx, store.TaskInsertParams{
		Now: s.clock.Now(), Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex(),
		Priority: deref(body.Priority), Request: req, IdempotencyKey: key, Declared: w.Declared,
	})
	cancel()
	switch {
	case errors.Is(err, store.ErrWalletDisabled):
		return errorf(http.StatusConflict, "wallet %q is disabled: it takes no new task", w.ID)
	case errors.Is(err, store.ErrWalletGone):
		return errNotFound
	}
	var conflict *store.IdempotencyConflictError
	if errors.As(err, &conflict) {
		return errorf(http.StatusUnprocessableEntity, "Idempotency-Key %q: wallet %q already has task %s under this key, stored from a different request", key, w.ID, conflict.TaskID)
	}
	if err != nil {
		return s.policyRefusal(err)
	}
	if created {
		s.metrics.Transition("wallet", "received", 1)
	}
	if !fireAndForget && !task.Status.Terminal() {
		// Only the request that stored the task cancels it when its client
		// leaves: a replay merely watches.
		task, err = s.awaitTask(ctx, task, created, s.cfg.TaskMaxWait)
		if err != nil {
			return err
		}
	}
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, taskPath(task))
	if !created {
		h.Set("Idempotent-Replayed", "true")
	}
	status := http.StatusAccepted
	if task.Status.Terminal() {
		status = http.StatusOK
	}
	return c.JSON(status, walletTaskResultJSON{
		WalletTaskResult: apigen.WalletTaskResult{Success: true, Created: &created},
		Task:             toWalletTask(task, true),
	})
}

// maxTaskWaitSeconds bounds GET task's wait parameter (the server cuts it
// further to TaskMaxWait).
const maxTaskWaitSeconds = 3600

// awaitTask reads task again until it has ended, the wait is over
// (maxWait, or StopWaiting), or the client goes away. It returns the
// task as last read. When the client goes away and cancel is set, a task
// still waiting is cancelled (a task is aborted if its client disconnects);
// an executing one is not, as its transaction may be out. A read that finds
// the database unavailable (a failover) is tried again at the next poll:
// the task is stored, and a 503 would tell a client without an
// Idempotency-Key to send it a second time.
func (s *Server) awaitTask(ctx context.Context, task store.Task, cancel bool, maxWait time.Duration) (store.Task, error) {
	if maxWait <= 0 || task.Status.Terminal() {
		return task, nil
	}
	// Wall time, as it bounds a request, not a rule of the lane.
	deadline := time.Now().Add(maxWait)
	interval := taskPollFirst
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return task, nil
		}
		timer := time.NewTimer(min(interval, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			return store.Task{}, s.clientLeft(ctx, task, cancel)
		case <-s.stopping:
			timer.Stop()
			return task, nil
		case <-timer.C:
		}
		interval = min(2*interval, taskPollMax)
		dctx, done := s.dbContext(ctx)
		t, err := s.store.TaskGet(dctx, task.Wallet, task.ID)
		done()
		switch {
		case ctx.Err() != nil:
			return store.Task{}, s.clientLeft(ctx, task, cancel)
		case store.IsUnavailable(err):
			s.logger.Debug("httpapi: database unavailable while a send-tx waits for its task; waiting on", "task", task.ID, "error", err)
			continue
		case err != nil:
			return store.Task{}, err
		}
		task = t
		if task.Status.Terminal() {
			return task, nil
		}
	}
}

// clientLeft cancels task, if cancel is set and it is still waiting, for a
// client that went away, and returns the request's error.
func (s *Server) clientLeft(ctx context.Context, task store.Task, cancel bool) error {
	select {
	case <-s.stopping:
		// The server is closing the connection, not the client.
		return ctx.Err()
	default:
	}
	if !cancel {
		return ctx.Err()
	}
	dctx, done := s.dbContext(context.WithoutCancel(ctx))
	defer done()
	t, cancelled, err := s.store.TaskCancel(dctx, store.TaskCancelParams{Now: s.clock.Now(), Wallet: task.Wallet, ID: task.ID})
	switch {
	case err != nil:
		s.logger.Warn("httpapi: cancelling the task of a client that went away", "task", task.ID, "wallet", task.Wallet, "error", err)
	case cancelled:
		s.metrics.Transition("wallet", "cancelled", 1)
		s.logger.Debug("httpapi: client went away; its waiting task is cancelled", "task", task.ID, "wallet", task.Wallet)
	default:
		s.logger.Debug("httpapi: client went away; its task is not waiting and goes on", "task", task.ID, "wallet", task.Wallet, "status", t.Status.String())
	}
	return ctx.Err()
}

// GetWalletTask answers GET /v1/wallets/{wallet}/tasks/{id}: the task,
// its attempts and its wallet's health read from one snapshot.
func (s *Server) GetWalletTask(c echo.Context, walletName, id string, params apigen.GetWalletTaskParams) error {
	var wait time.Duration
	if params.Wait != nil {
		if *params.Wait < 0 || *params.Wait > maxTaskWaitSeconds {
			return errorf(http.StatusBadRequest, "query parameter wait: seconds from 0 to %d", maxTaskWaitSeconds)
		}
		wait = min(time.Duration(*params.Wait)*time.Second, s.cfg.TaskMaxWait)
	}
	// With wait the request is a long-poll (longPoll): each read is
	// bounded by RequestTimeout instead of the whole request.
	read := func(ctx context.Context, wallet, id string) (store.TaskView, error) {
		dctx, done := s.dbContext(ctx)
		defer done()
		return s.store.TaskView(dctx, wallet, id)
	}
	v, err := readTaskWith(s, c, walletName, "path parameter wallet", id, "path parameter id", read)
	if err != nil {
		return err
	}
	if wait > 0 && !v.Task.Status.Terminal() {
		// A long-poll: the task once it has ended, or as it is when the
		// wait is over; a client that goes away cancels nothing.
		if _, err := s.awaitTask(c.Request().Context(), v.Task, false, wait); err != nil {
			return err
		}
		if v, err = read(c.Request().Context(), v.Task.Wallet, id); err != nil {
			return err
		}
	}
	out := toWalletTask(v.Task, true)
	var head *int64
	if v.Health != nil {
		head = v.Health.ChainHead
		markPausedBy(*v.Health, &out)
	}
	// The attempts, and, for a task whose transaction is mined, its block
	// and confirmations (by the chain head the wallet's last check read).
	out.Attempts = make([]txAttemptJSON, len(v.Attempts))
	for i, a := range v.Attempts {
		out.Attempts[i] = toTxAttempt(a, head)
		if a.MinedBlock != nil && (a.State == store.AttemptMined || a.State == store.AttemptConfirmed) {
			out.MinedBlock, out.Confirmations = a.MinedBlock, out.Attempts[i].Confirmations
		}
	}
	return c.JSON(http.StatusOK, walletTaskResultJSON{WalletTaskResult: apigen.WalletTaskResult{Success: true}, Task: out})
}

// txAttemptJSON is apigen.TxAttempt as the API writes it, its times written
// by apiTime (see batchJSON).
type txAttemptJSON struct {
	apigen.TxAttempt
	CreatedAt   apiTime  `json:"created_at"`
	SentAt      *apiTime `json:"sent_at,omitempty"`
	ConfirmedAt *apiTime `json:"confirmed_at,omitempty"`
}

// toTxAttempt converts a stored attempt; head is the chain's head as the
// wallet last read it (nil: unknown), from which a mined attempt's
// confirmations are counted.
func toTxAttempt(a store.Attempt, head *int64) txAttemptJSON {
	o := apigen.TxAttempt{
		Nonce: a.Nonce, TxHash: a.TxHash, State: apigen.TxAttemptState(a.State), GasLimit: int64(a.GasLimit),
		MaxPriorityFeePerGas: a.MaxPriorityFeePerGas.String(), MaxFeePerGas: a.MaxFeePerGas.String(), MinedBlock: a.MinedBlock,
	}
	if a.MinedBlockHash != "" {
		o.MinedBlockHash = &a.MinedBlockHash
	}
	if a.MinedBlock != nil && head != nil && *head >= *a.MinedBlock && (a.State == store.AttemptMined || a.State == store.AttemptConfirmed) {
		o.Confirmations = ptr(*head - *a.MinedBlock + 1)
	}
	if a.SupersededBy != "" {
		o.SupersededBy = &a.SupersededBy
	}
	if a.Reorgs > 0 {
		o.Reorgs = &a.Reorgs
	}
	if a.LastError != "" {
		o.LastError = &a.LastError
	}
	if a.Kind != "" {
		o.Kind = ptr(apigen.TxAttemptKind(a.Kind))
	}
	return txAttemptJSON{TxAttempt: o, CreatedAt: apiTime(a.CreatedAt), SentAt: apiTimePtr(a.SentAt), ConfirmedAt: apiTimePtr(a.ConfirmedAt)}
}

// markPaused sets wallet_paused on the waiting tasks among tasks when the
// wallet (chain, sender) is paused for its balance: one read of its health.
func (s *Server) markPaused(c echo.Context, chainID int64, sender string, tasks ...*walletTaskJSON) error {
	waiting := false
	for _, t := range tasks {
		waiting = waiting || t.Status == apigen.WalletTaskStatusWaiting
	}
	if !waiting {
		return nil
	}
	h, err := s.store.WalletHealthGet(c.Request().Context(), chainID, sender)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	markPausedBy(h, tasks...)
	return nil
}

// markPausedBy sets wallet_paused on the waiting tasks among tasks when h,
// their wallet's health, says it is paused for its balance.
func markPausedBy(h store.WalletHealth, tasks ...*walletTaskJSON) {
	if !h.Paused {
		return
	}
	for _, t := range tasks {
		if t.Status == apigen.WalletTaskStatusWaiting {
			t.WalletPaused = ptr(true)
		}
	}
}

// CancelWalletTask answers DELETE /v1/wallets/{wallet}/tasks/{id}: a waiting
// task is cancelled; a task already cancelled answers as if it was now, so
// that a retried DELETE succeeds; any other is 409, and so is a waiting task
// whose transaction a signer outside the process was asked to sign (its
// nonce is pinned to it: store.TaskBeingSignedError).
func (s *Server) CancelWalletTask(c echo.Context, walletName, id string) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	if err := checkTaskID(id, "path parameter id"); err != nil {
		return err
	}
	task, cancelled, err := s.store.TaskCancel(c.Request().Context(), store.TaskCancelParams{
		Now: s.clock.Now(), Wallet: w.ID, ID: id, Audit: principalOf(c.Request().Context()).audit("api"),
	})
	var signing *store.TaskBeingSignedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.As(err, &signing):
		return errorf(http.StatusConflict, "task %s is not cancelled: its transaction is being signed", id)
	case err != nil:
		return err
	case cancelled:
		s.metrics.Transition("wallet", "cancelled", 1)
	case !task.Cancelled:
		return errorf(http.StatusConflict, "task %s is %s: only a waiting task can be cancelled", task.ID, statusName(task.Status))
	}
	return c.JSON(http.StatusOK, walletTaskResultJSON{WalletTaskResult: apigen.WalletTaskResult{Success: true}, Task: toWalletTask(task, true)})
}

// ListWalletTasks answers GET /v1/wallets/{wallet}/tasks: one page of the
// wallet's tasks by id.
func (s *Server) ListWalletTasks(c echo.Context, walletName string, params apigen.ListWalletTasksParams) error {
	w, err := s.walletToRead(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	p := store.TaskListParams{Wallet: w.ID, After: deref(params.After)}
	if problem := textProblem(p.After); problem != "" {
		return errorf(http.StatusBadRequest, "query parameter after: %s", problem)
	}
	if st := deref(params.Status); st != "" {
		parsed, ok := parseStatusName(string(st))
		if !ok {
			return errorf(http.StatusBadRequest, "query parameter status: want waiting, executing, error or done, got %q", st)
		}
		p.Status = &parsed
	}
	page := walletTaskPageJSON{WalletTaskPage: apigen.WalletTaskPage{Success: true}}
	page.Tasks, page.NextAfter, err = listPage(c, params.Limit, func(ctx context.Context, limit int) ([]store.Task, error) {
		p.Limit = limit
		return s.store.TaskList(ctx, p)
	}, func(t store.Task) walletTaskJSON { return toWalletTask(t, false) }, func(t store.Task) string { return t.ID })
	if err != nil {
		return err
	}
	ptrs := make([]*walletTaskJSON, len(page.Tasks))
	for i := range page.Tasks {
		ptrs[i] = &page.Tasks[i]
	}
	if err := s.markPaused(c, w.ChainID, w.Address().Hex(), ptrs...); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// GetSendTxTaskStatus answers the Hathor headless wallet's GET
// /wallet/tasks/send-tx/{taskId} with X-Wallet-ID: exactly the headless
// wallet's object, written without a trailing newline, so a client that
// compares bytes gets what the headless wallet sends.
func (s *Server) GetSendTxTaskStatus(c echo.Context, id string, params apigen.GetSendTxTaskStatusParams) error {
	task, err := readTaskWith(s, c, params.XWalletID, "header X-Wallet-ID", id, "path parameter taskId", s.store.TaskGet)
	if err != nil {
		return err
	}
	out := apigen.SendTxTaskStatus{
		Success: true, Code: apigen.SendTxTaskStatusCode(task.Status), Status: apigen.SendTxTaskStatusStatus(task.Status.String()),
	}
	switch task.Status {
	case store.TaskDone:
		out.TxID = &task.TxHash
	case store.TaskError:
		out.Message = &task.Error
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("writing the status of task %s: %w", task.ID, err)
	}
	return c.JSONBlob(http.StatusOK, b)
}

// readTaskWith checks the request's wallet and task id, and reads the task
// with read, if the request's key may see it (a missing one, or one of
// another wallet, is 404).
func readTaskWith[T any](s *Server, c echo.Context, walletName, walletParam, id, idParam string,
	read func(ctx context.Context, wallet, id string) (T, error)) (T, error) {
	var zero T
	w, err := s.walletToRead(c, walletName, walletParam)
	if err != nil {
		return zero, err
	}
	if err := checkTaskID(id, idParam); err != nil {
		return zero, err
	}
	task, err := read(c.Request().Context(), w.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return zero, errNotFound
	}
	return task, err
}

// checkTaskID refuses an id PostgreSQL could not hold as text (400) and
// answers an id no task can have as a missing task, without asking.
func checkTaskID(id, param string) error {
	if problem := textProblem(id); problem != "" {
		return errorf(http.StatusBadRequest, "%s: %s", param, problem)
	}
	if !taskID.MatchString(id) {
		return errNotFound
	}
	return nil
}

// parseTaskParam reads task=true|false (or 1|0); absent is false.
func parseTaskParam(p *string) (bool, *Error) {
	if p == nil {
		return false, nil
	}
	switch strings.ToLower(*p) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errorf(http.StatusBadRequest, "query parameter task: must be true or false")
}

// checkIdempotencyKey allows 1 to 256 printable ASCII characters (an HTTP
// structured-field string, as the Idempotency-Key draft has it), which
// PostgreSQL text always holds.
func checkIdempotencyKey(p *string) (string, *Error) {
	if p == nil {
		return "", nil
	}
	key := *p
	if key == "" || len(key) > maxIdempotencyKey {
		return "", errorf(http.StatusBadRequest, "header Idempotency-Key: must be 1 to %d characters", maxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", errorf(http.StatusBadRequest, "header Idempotency-Key: must be printable ASCII")
		}
	}
	return key, nil
}

// Bounds of a send-tx's gas limit: a plain transfer's gas, and the largest
// integer a JSON client reads exactly (2^53 - 1).
const (
	minGasLimit = 21_000
	maxGasLimit = 1<<53 - 1
)

// validateSendTx checks a send-tx body and returns the task's request. Every
// amount fits what the chain and the schema hold; fees above maxFee are
// refused.
func validateSendTx(b apigen.SendTxRequest, maxFee *big.Int) (store.TaskRequest, *Error) {
	var req store.TaskRequest
	switch {
	case b.To == "":
		return req, errorf(http.StatusBadRequest, "field to: required (0x and 40 hex digits)")
	case !hexAddress.MatchString(b.To):
		return req, errorf(http.StatusBadRequest, "field to: must be 0x and 40 hex digits")
	case mixedCase(b.To[2:]) && common.HexToAddress(b.To).Hex() != b.To:
		// A mixed-case address carries an EIP-55 checksum; a wrong one is
		// a mistyped address, and the value would be lost.
		return req, errorf(http.StatusBadRequest, "field to: mixed-case address with a wrong EIP-55 checksum (write it in one case, or as %s if that is the one meant)", common.HexToAddress(b.To).Hex())
	}
	req.To = b.To
	req.Value = new(big.Int)
	if b.Value != nil {
		v, ok := parseUint256(*b.Value)
		if !ok {
			return req, errorf(http.StatusBadRequest, "field value: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex")
		}
		req.Value = v
	}
	if b.Data != nil {
		d := *b.Data
		if !strings.HasPrefix(d, "0x") {
			return req, errorf(http.StatusBadRequest, "field data: must be 0x-prefixed hex")
		}
		if (len(d)-2)/2 > maxTxData {
			return req, errorf(http.StatusRequestEntityTooLarge, "field data: larger than %d bytes", maxTxData)
		}
		data, err := hex.DecodeString(d[2:])
		if err != nil {
			return req, errorf(http.StatusBadRequest, "field data: must be 0x and an even number of hex digits")
		}
		req.Data = data
	}
	if b.Function != nil || b.Abi != nil || b.Method != nil || b.Args != nil {
		if apiErr := encodeCall(b, &req); apiErr != nil {
			return req, apiErr
		}
	}
	if b.Preflight != nil {
		req.SkipPreflight = !*b.Preflight
	}
	if b.GasLimit != nil {
		if *b.GasLimit < minGasLimit || *b.GasLimit > maxGasLimit {
			return req, errorf(http.StatusBadRequest, "field gas_limit: must be from %d (a plain transfer) to %d", minGasLimit, int64(maxGasLimit))
		}
		g := uint64(*b.GasLimit)
		req.GasLimit = &g
	}
	for _, f := range []struct {
		name string
		in   *string
		out  **big.Int
	}{{"max_priority_fee_per_gas", b.MaxPriorityFeePerGas, &req.TipCap}, {"max_fee_per_gas", b.MaxFeePerGas, &req.FeeCap}} {
		if f.in == nil {
			continue
		}
		v, err := feeValue(f.name, *f.in, maxFee)
		if err != nil {
			return req, err
		}
		*f.out = v
	}
	if req.TipCap != nil && req.FeeCap != nil {
		if err := tipWithinCap(req.TipCap, req.FeeCap); err != nil {
			return req, err
		}
	}
	return req, nil
}

// feeValue parses a fee field: a uint256 in wei, decimal or 0x hex, at
// most the server's ceiling maxFee (--wallet-max-fee-per-gas).
func feeValue(name, in string, maxFee *big.Int) (*big.Int, *Error) {
	v, ok := parseUint256(in)
	if !ok {
		return nil, errorf(http.StatusBadRequest, "field %s: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex", name)
	}
	if v.Cmp(maxFee) > 0 {
		return nil, errorf(http.StatusBadRequest, "field %s: %s wei per gas is above this server's ceiling of %s (--wallet-max-fee-per-gas)", name, v, maxFee)
	}
	return v, nil
}

// tipWithinCap refuses a tip above the fee cap.
func tipWithinCap(tip, feeCap *big.Int) *Error {
	if tip.Cmp(feeCap) > 0 {
		return errorf(http.StatusBadRequest, "field max_fee_per_gas: must be at least max_priority_fee_per_gas (%s)", tip)
	}
	return nil
}

// encodeCall encodes the contract call b names (by function, or by abi and
// method, with args) into req's data, and keeps the call beside it.
func encodeCall(b apigen.SendTxRequest, req *store.TaskRequest) *Error {
	if b.Data != nil {
		return errorf(http.StatusBadRequest, "field data: not with function or abi, which name a call for the server to encode: send one or the other")
	}
	call, err := calldata.Encode(calldata.Request{Function: deref(b.Function), ABI: deref(b.Abi), Method: deref(b.Method), Args: deref(b.Args)})
	var refused *calldata.Error
	switch {
	case errors.As(err, &refused):
		return errorf(http.StatusBadRequest, "field %s: %s", refused.Field, refused.Problem)
	case err != nil:
		return errorf(http.StatusInternalServerError, "encoding the call: %v", err)
	case len(call.Data) > maxTxData:
		return errorf(http.StatusRequestEntityTooLarge, "field args: the call encodes to %d bytes of data, more than %d", len(call.Data), maxTxData)
	}
	req.Data = call.Data
	req.Call = &store.TaskCall{Function: call.Function, Method: call.Method, ABI: call.ABI, Args: call.Args}
	stored, err := json.Marshal(req.Call)
	switch {
	case err != nil:
		return errorf(http.StatusInternalServerError, "writing the call: %v", err)
	case len(stored) > store.MaxTaskCallBytes:
		return errorf(http.StatusRequestEntityTooLarge, "fields abi and args: the call is %d bytes as stored, more than %d", len(stored), store.MaxTaskCallBytes)
	}
	return nil
}

// mixedCase reports whether hex digits have letters in both cases.
func mixedCase(h string) bool {
	return strings.ToLower(h) != h && strings.ToUpper(h) != h
}

// parseUint256 reads a decimal or 0x-hex whole number below 2^256.
func parseUint256(s string) (*big.Int, bool) {
	digits, base := s, 10
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		digits, base = rest, 16
	}
	if digits == "" {
		return nil, false
	}
	for _, c := range []byte(digits) {
		if !('0' <= c && c <= '9' || base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')) {
			return nil, false
		}
	}
	// Leading zeros say nothing; past them, a uint256 has at most 78
	// decimal or 64 hex digits (a longer string is not parsed at all).
	digits = strings.TrimLeft(digits, "0")
	if len(digits) > 78 {
		return nil, false
	}
	v, ok := new(big.Int).SetString("0"+digits, base)
	if !ok || v.Cmp(maxUint256) > 0 {
		return nil, false
	}
	return v, true
}

// statusName is a task status as the /v1 routes write it.
func statusName(st store.TaskStatus) apigen.WalletTaskStatus {
	switch st {
	case store.TaskWaiting:
		return apigen.WalletTaskStatusWaiting
	case store.TaskExecuting:
		return apigen.WalletTaskStatusExecuting
	case store.TaskError:
		return apigen.WalletTaskStatusError
	case store.TaskDone:
		return apigen.WalletTaskStatusDone
	}
	return apigen.WalletTaskStatus(st.String())
}

func parseStatusName(name string) (store.TaskStatus, bool) {
	for _, st := range []store.TaskStatus{store.TaskWaiting, store.TaskExecuting, store.TaskError, store.TaskDone} {
		if string(statusName(st)) == name {
			return st, true
		}
	}
	return 0, false
}

// taskPath is the task's URL path.
func taskPath(t store.Task) string {
	return "/v1/wallets/" + url.PathEscape(t.Wallet) + "/tasks/" + t.ID
}

// walletTaskJSON is apigen.WalletTask as the API writes it, its times
// written by apiTime (see batchJSON).
type walletTaskJSON struct {
	apigen.WalletTask
	CreatedAt     apiTime  `json:"created_at"`
	UpdatedAt     apiTime  `json:"updated_at"`
	StartedAt     *apiTime `json:"started_at,omitempty"`
	FinishedAt    *apiTime `json:"finished_at,omitempty"`
	PriceCappedAt *apiTime `json:"price_capped_at,omitempty"`
	// Attempts, only when one task is read.
	Attempts          []txAttemptJSON `json:"attempts,omitempty"`
	CancelRequestedAt *apiTime        `json:"cancel_requested_at,omitempty"`
}

// walletTaskResultJSON and walletTaskPageJSON are the generated results
// with walletTaskJSON in them.
type (
	walletTaskResultJSON struct {
		apigen.WalletTaskResult
		Task walletTaskJSON `json:"task"`
	}
	walletTaskPageJSON struct {
		apigen.WalletTaskPage
		Tasks []walletTaskJSON `json:"tasks"`
	}
)

// toWalletTask converts a stored task; lists leave its data out.
func toWalletTask(t store.Task, withData bool) walletTaskJSON {
	o := apigen.WalletTask{
		ID: t.ID, Wallet: t.Wallet, ChainID: t.ChainID, From: t.Sender, To: t.Request.To,
		Value: t.Request.Value.String(), Priority: t.Priority, Status: statusName(t.Status),
		Code: apigen.WalletTaskCode(t.Status), Reverted: t.Reverted, Cancelled: t.Cancelled,
		IdempotencyKey: omitZero(t.IdempotencyKey), TxHash: omitZero(t.TxHash), Error: omitZero(t.Error),
	}
	if withData {
		d := "0x" + hex.EncodeToString(t.Request.Data)
		o.Data = &d
	}
	if t.Request.GasLimit != nil {
		g := int64(*t.Request.GasLimit)
		o.GasLimit = &g
	}
	if t.Request.TipCap != nil {
		o.MaxPriorityFeePerGas = ptr(t.Request.TipCap.String())
	}
	if t.Request.FeeCap != nil {
		o.MaxFeePerGas = ptr(t.Request.FeeCap.String())
	}
	if c := t.Request.Call; c != nil {
		o.Call = &apigen.TaskCall{Function: c.Function, Method: omitZero(c.Method), Args: c.Args}
		if withData && len(c.ABI) > 0 {
			o.Call.Abi = &c.ABI
		}
	}
	if t.Bumps > 0 {
		o.Bumps = &t.Bumps
	}
	if t.Replacements > 0 {
		o.Replacements = &t.Replacements
	}
	if t.Reorgs > 0 {
		o.Reorgs = &t.Reorgs
	}
	o.Preflight = ptr(!t.Request.SkipPreflight)
	if len(t.Revert) > 0 {
		o.Revert = &t.Revert
	}
	if len(t.Logs) > 0 {
		o.Logs = &t.Logs
	}
	if t.SpeedUp != nil && t.Status == store.TaskExecuting {
		o.SpeedUp = &apigen.SpeedUpRequest{MaxFeePerGas: t.SpeedUp.FeeCap.String(), MaxPriorityFeePerGas: t.SpeedUp.TipCap.String()}
	}
	return walletTaskJSON{
		WalletTask: o, CreatedAt: apiTime(t.CreatedAt), UpdatedAt: apiTime(t.UpdatedAt),
		StartedAt: apiTimePtr(t.StartedAt), FinishedAt: apiTimePtr(t.FinishedAt),
		PriceCappedAt: apiTimePtr(t.PriceCappedAt), CancelRequestedAt: apiTimePtr(t.CancelRequestedAt),
	}
}

// GetWallet answers GET /v1/wallets/{wallet}: the wallet and its health.
func (s *Server) GetWallet(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletToRead(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	return s.walletInfo(c, w)
}

// PauseWallet answers POST /v1/wallets/{wallet}/pause: an operator's hold.
func (s *Server) PauseWallet(c echo.Context, walletName apigen.Wallet) error {
	return s.holdWallet(c, walletName, s.store.WalletHealthHold)
}

// ResumeWallet answers POST /v1/wallets/{wallet}/resume.
func (s *Server) ResumeWallet(c echo.Context, walletName apigen.Wallet) error {
	return s.holdWallet(c, walletName, s.store.WalletHealthRelease)
}

// holdWallet holds or releases the wallet (change), audited as the
// request's principal, and answers the wallet.
func (s *Server) holdWallet(c echo.Context, walletName string, change func(context.Context, store.WalletHoldParams) (store.WalletHealth, bool, error)) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, _, err := change(ctx, store.WalletHoldParams{
		Now: s.clock.Now(), ChainID: w.ChainID, Sender: w.Address().Hex(), Wallet: w.ID,
		Audit: principalOf(ctx).audit("api"),
	}); err != nil {
		return err
	}
	return s.walletInfo(c, w)
}

// walletInfo answers the wallet w with its health.
func (s *Server) walletInfo(c echo.Context, w keystore.Wallet) error {
	out, err := s.walletInfoOf(c.Request().Context(), w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// walletInfoOf returns the wallet w with its status, its signer's state and
// its health, as GET /v1/wallets/{wallet} shows it.
func (s *Server) walletInfoOf(ctx context.Context, w keystore.Wallet) (apigen.WalletInfo, error) {
	addr := w.Address().Hex()
	backend := keystore.BackendOf(w.Signer)
	out := apigen.WalletInfo{Wallet: w.ID, Address: addr, ChainID: w.ChainID,
		Status: apigen.WalletStatus(store.StatusOf(nil, backend)), Signer: apigen.WalletSigner{Backend: backend, State: apigen.WalletSignerStateUnknown}}
	if w.Disabled {
		out.Disabled = ptr(true)
	}
	h, err := s.store.WalletHealthGet(ctx, w.ChainID, addr)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return apigen.WalletInfo{}, err
	default:
		out.Status = apigen.WalletStatus(store.StatusOf(&h, backend))
		if sh := h.SignerOf(backend); sh.State != "" {
			out.Signer.State, out.Signer.Since = apigen.WalletSignerState(sh.State), sh.Since
			if sh.Error != "" {
				out.Signer.Error = &sh.Error
			}
		}
		out.Health = &apigen.WalletHealth{
			ChainNonce: h.ChainNonce, ChainNonceSince: h.ChainNonceSince, BalanceAt: h.BalanceAt,
			Paused: h.Paused, Resets: h.Resets, LastResetAt: h.LastResetAt, LastResetFrom: h.LastResetFrom, LastResetTo: h.LastResetTo,
			HeldAt: h.HeldAt, HeldBy: h.HeldBy, RecoveryReason: h.RecoveryReason, RecoverySince: h.RecoverySince,
		}
		if h.Balance != nil {
			out.Health.Balance = ptr(h.Balance.String())
		}
		if h.Threshold != nil {
			out.Health.Threshold = ptr(h.Threshold.String())
		}
	}
	return out, nil
}
