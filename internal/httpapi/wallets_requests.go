package httpapi

import (
	"errors"
	"math/big"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// RequestWalletTaskCancel answers POST /v1/wallets/{wallet}/tasks/{id}/cancel:
// a waiting task is cancelled at once (200, as DELETE); for an executing one
// the request is recorded and the wallet's worker sends a no-op at its
// nonce (202); a task cancelled before answers 200, one that ended
// otherwise 409. The API signs nothing: the worker of the wallet's shard is
// the only one that signs at its nonces.
func (s *Server) RequestWalletTaskCancel(c echo.Context, walletName, id string) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	if err := checkTaskID(id, "path parameter id"); err != nil {
		return err
	}
	ctx := c.Request().Context()
	task, outcome, err := s.store.TaskRequestCancel(ctx, store.TaskCancelParams{
		Now: s.clock.Now(), Wallet: w.ID, ID: id, Audit: principalOf(ctx).audit("api"),
	})
	var signing *store.TaskBeingSignedError
	var refused *store.TaskRefusedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.As(err, &signing):
		return errorf(http.StatusConflict, "task %s is not cancelled: its transaction is being signed", id)
	case errors.As(err, &refused):
		return errorf(http.StatusConflict, "%s", refused.Error())
	case err != nil:
		return err
	}
	code := http.StatusOK
	switch outcome {
	case store.CancelledNow:
		s.metrics.Transition("wallet", "cancelled", 1)
	case store.CancelRequested:
		code = http.StatusAccepted
	}
	return c.JSON(code, walletTaskResultJSON{WalletTaskResult: apigen.WalletTaskResult{Success: true}, Task: toWalletTask(task, true)})
}

// SpeedUpWalletTask answers POST /v1/wallets/{wallet}/tasks/{id}/speed-up:
// the fees are checked as send-tx's are (400), then against the task's live
// transaction by geth's replacement rule (409 naming the least that would
// do), and recorded for the wallet's worker (202).
func (s *Server) SpeedUpWalletTask(c echo.Context, walletName, id string) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	if err := checkTaskID(id, "path parameter id"); err != nil {
		return err
	}
	var body apigen.SpeedUpRequest
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	var fees store.SpeedUpFees
	if fees.TipCap, err = s.feeField("max_priority_fee_per_gas", body.MaxPriorityFeePerGas); err != nil {
		return err
	}
	if fees.FeeCap, err = s.feeField("max_fee_per_gas", body.MaxFeePerGas); err != nil {
		return err
	}
	if err := tipWithinCap(fees.TipCap, fees.FeeCap); err != nil {
		return err
	}
	ctx := c.Request().Context()
	task, err := s.store.TaskRequestSpeedUp(ctx, store.TaskSpeedUpParams{
		Now: s.clock.Now(), Wallet: w.ID, ID: id, Fees: fees, Audit: principalOf(ctx).audit("api"),
	})
	var refused *store.TaskRefusedError
	var low *store.SpeedUpTooLowError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.As(err, &refused), errors.As(err, &low):
		return errorf(http.StatusConflict, "%s", err.Error())
	case err != nil:
		return s.policyRefusal(err)
	}
	return c.JSON(http.StatusAccepted, walletTaskResultJSON{WalletTaskResult: apigen.WalletTaskResult{Success: true}, Task: toWalletTask(task, true)})
}

// feeField parses a required fee field as send-tx's: a uint256 in wei,
// decimal or 0x hex, at most the server's ceiling (--wallet-max-fee-per-gas).
func (s *Server) feeField(name, in string) (*big.Int, error) {
	if in == "" {
		return nil, errorf(http.StatusBadRequest, "field %s: required", name)
	}
	v, err := feeValue(name, in, s.cfg.MaxFeePerGas)
	if err != nil {
		return nil, err
	}
	return v, nil
}
