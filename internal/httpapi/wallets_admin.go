package httpapi

import (
	"errors"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The wallets added at run time: GET /v1/wallets lists what the key may
// see; POST /v1/wallets, PATCH and DELETE /v1/wallets/{wallet} need admin
// (opNeeds) and go through the node's signers.Manager, which opens the
// signer here before the row is stored and tells every process.

// ListWallets answers GET /v1/wallets.
func (s *Server) ListWallets(c echo.Context) error {
	p := principalOf(c.Request().Context())
	out := apigen.WalletList{Wallets: []apigen.WalletEntry{}}
	for _, e := range s.walletEntries() {
		if p.wallet(e.Name) || p.reads() {
			out.Wallets = append(out.Wallets, walletEntry(e))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// walletEntries are every wallet's entries: the manager's, else the
// registry's (a process built without one).
func (s *Server) walletEntries() []signers.Entry {
	if s.walletAdmin != nil {
		return s.walletAdmin.List()
	}
	if s.wallets == nil {
		return nil
	}
	var out []signers.Entry
	for _, w := range s.wallets.All() {
		out = append(out, signers.Entry{Name: w.ID, Chain: w.Chain, ChainID: w.ChainID, Address: common.Address(w.Address()).Hex(),
			Backend: keystore.BackendOf(w.Signer), Source: "config", Disabled: w.Disabled, Loaded: true})
	}
	return out
}

// AddWallet answers POST /v1/wallets.
func (s *Server) AddWallet(c echo.Context) error {
	admin, err := s.needWalletAdmin()
	if err != nil {
		return err
	}
	var body apigen.WalletDeclaration
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	d := signers.Decl{Name: body.Name, Chain: deref(body.Chain), Backend: string(body.Backend), Key: deref(body.Key)}
	if body.Address != nil {
		if !common.IsHexAddress(*body.Address) {
			return errorf(http.StatusBadRequest, "address: %q is not a hex address", *body.Address)
		}
		d.Address = common.HexToAddress(*body.Address)
	}
	ctx := c.Request().Context()
	e, err := admin.Add(ctx, d, deref(body.Disabled), principalOf(ctx).audit("api"))
	if err != nil {
		return walletAdminError(err)
	}
	return c.JSON(http.StatusCreated, walletEntry(e))
}

// UpdateWallet answers PATCH /v1/wallets/{wallet}.
func (s *Server) UpdateWallet(c echo.Context, walletName apigen.Wallet) error {
	admin, err := s.needWalletAdmin()
	if err != nil {
		return err
	}
	if problem := textProblem(walletName); problem != "" {
		return errorf(http.StatusBadRequest, "path parameter wallet: %s", problem)
	}
	var body apigen.WalletUpdate
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	e, err := admin.SetDisabled(ctx, walletName, body.Disabled, principalOf(ctx).audit("api"))
	if err != nil {
		return walletAdminError(err)
	}
	return c.JSON(http.StatusOK, walletEntry(e))
}

// RemoveWallet answers DELETE /v1/wallets/{wallet}.
func (s *Server) RemoveWallet(c echo.Context, walletName apigen.Wallet) error {
	admin, err := s.needWalletAdmin()
	if err != nil {
		return err
	}
	if problem := textProblem(walletName); problem != "" {
		return errorf(http.StatusBadRequest, "path parameter wallet: %s", problem)
	}
	ctx := c.Request().Context()
	if err := admin.Remove(ctx, walletName, principalOf(ctx).audit("api")); err != nil {
		return walletAdminError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// needWalletAdmin is the manager, or 404 when the process runs no wallet
// lane.
func (s *Server) needWalletAdmin() (*signers.Manager, error) {
	if s.walletAdmin == nil {
		return nil, errorf(http.StatusNotFound, "not found: this process runs no wallet lane (--wallet-chain or --wallet-ledger-url)")
	}
	return s.walletAdmin, nil
}

// walletAdminError is the answer to a manager's error.
func walletAdminError(err error) error {
	var (
		refused *signers.RefusedError
		down    *keystore.UnavailableError
	)
	switch {
	case errors.Is(err, signers.ErrInvalid):
		return errorf(http.StatusBadRequest, "%v", err)
	case errors.Is(err, signers.ErrConfigured), errors.Is(err, store.ErrWalletTaken), errors.Is(err, store.ErrWalletBusy):
		return errorf(http.StatusConflict, "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.As(err, &refused):
		return errorf(http.StatusUnprocessableEntity, "%v", err)
	case errors.As(err, &down):
		return errorf(http.StatusServiceUnavailable, "%v", err)
	}
	return err
}

func walletEntry(e signers.Entry) apigen.WalletEntry {
	out := apigen.WalletEntry{
		Wallet: e.Name, ChainID: e.ChainID, Address: e.Address, Backend: e.Backend, Source: apigen.WalletEntrySource(e.Source),
		Disabled: e.Disabled, Loaded: e.Loaded, CreatedAt: e.CreatedAt,
	}
	if e.Chain != "" {
		out.Chain = ptr(e.Chain)
	}
	if e.Key != "" {
		out.Key = ptr(e.Key)
	}
	if e.LoadError != "" {
		out.LoadError = ptr(e.LoadError)
	}
	if e.CreatedBy != "" {
		out.CreatedBy = ptr(e.CreatedBy)
	}
	return out
}
