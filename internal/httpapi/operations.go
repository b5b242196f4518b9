package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Healthz answers GET /healthz: the process is up.
func (s *Server) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, apigen.Health{Success: true, Status: apigen.HealthStatusUp})
}

// Readyz answers GET /readyz: the database answers and is migrated. A
// chain none of whose nodes answers well is named in the answer
// (unavailable_chains) but does not make the process unready: the API
// still takes and answers tasks, which are sent once a node is back, and
// every process of a deployment reads the same providers, so taking this
// one out of service would serve no request better (docs/operations.md,
// "Chains and their nodes"). A wallet whose signer was unavailable at its
// last signature is named the same way (unavailable_signers), for the same
// reasons: every process signs through the same signers.
func (s *Server) Readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if s.ready != nil {
		if err := s.ready.Ready(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, apigen.Error{Success: false, Message: "not ready: " + err.Error()})
		}
	}
	out := apigen.Health{Success: true, Status: apigen.HealthStatusReady}
	if down := s.unavailableChains(); len(down) > 0 {
		out.UnavailableChains = &down
	}
	down, err := s.unavailableSigners(ctx)
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, apigen.Error{Success: false, Message: "not ready: " + err.Error()})
	}
	if len(down) > 0 {
		out.UnavailableSigners = &down
	}
	return c.JSON(http.StatusOK, out)
}

// maxUnavailableSigners bounds the wallets /readyz names.
const maxUnavailableSigners = 100

// unavailableSigners are the wallets /readyz names: those of this process
// whose signer was unavailable at its last signature, with its backend and
// error (which the backends keep free of secrets), as the wallets' health
// records them. A state recorded for another backend than the wallet's
// signer now (its signer was changed) is not this signer's.
func (s *Server) unavailableSigners(ctx context.Context) ([]apigen.UnavailableSigner, error) {
	if s.wallets == nil || len(s.wallets.All()) == 0 {
		return nil, nil
	}
	hs, err := s.store.WalletHealthListSignerUnavailable(ctx, maxUnavailableSigners)
	if err != nil {
		return nil, err
	}
	var out []apigen.UnavailableSigner
	for _, h := range hs {
		w, ok := s.wallets.BySender(h.ChainID, ledger.Address(common.HexToAddress(h.Sender)))
		if !ok {
			continue
		}
		sh := h.SignerOf(keystore.BackendOf(w.Signer))
		if sh.State != store.SignerUnavailable || sh.Since == nil {
			continue
		}
		u := apigen.UnavailableSigner{Wallet: w.ID, Backend: sh.Backend, Since: *sh.Since}
		if sh.Error != "" {
			u.Error = &sh.Error
		}
		out = append(out, u)
	}
	return out, nil
}

// Metrics answers GET /metrics with the Prometheus registry, or 404 when the
// process runs without metrics.
func (s *Server) Metrics(c echo.Context) error {
	if s.promHandler == nil {
		return echo.ErrNotFound
	}
	s.promHandler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// HeadHealthz answers HEAD /healthz as GET would, without the body (net/http
// drops the body of an answer to HEAD).
func (s *Server) HeadHealthz(c echo.Context) error { return s.Healthz(c) }

// HeadReadyz answers HEAD /readyz as GET would, without the body.
func (s *Server) HeadReadyz(c echo.Context) error { return s.Readyz(c) }
