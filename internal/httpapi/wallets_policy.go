package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/store"
)

// A wallet's policy: GET /v1/wallets/{wallet}/policy with the wallet's
// scope (or read), PUT and DELETE with admin (opNeeds), audited. The
// intake applies it in the transaction that stores a task (store.
// TaskInsert); a refusal is a 403 naming the rule (policyRefusal).

// GetWalletPolicy answers GET /v1/wallets/{wallet}/policy.
func (s *Server) GetWalletPolicy(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletToRead(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p, err := s.store.WalletPolicyGet(ctx, w.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "not found: wallet %q has no policy (it is unrestricted)", w.ID)
	case err != nil:
		return err
	}
	value, fees, err := s.store.WalletPolicySpend(ctx, store.WalletPolicySpendParams{
		Now: s.clock.Now(), Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex(), Policy: p.Policy,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, policyView(p, value, fees))
}

// PutWalletPolicy answers PUT /v1/wallets/{wallet}/policy.
func (s *Server) PutWalletPolicy(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	var body apigen.WalletPolicy
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	pol, err := policySpec(body).Policy()
	var bad *policy.Error
	switch {
	case errors.As(err, &bad):
		return errorf(http.StatusBadRequest, "field %s: %s", bad.Field, bad.Problem)
	case err != nil:
		return errorf(http.StatusBadRequest, "%v", err)
	}
	ctx := c.Request().Context()
	stored, err := s.store.WalletPolicyPut(ctx, store.WalletPolicyPutParams{
		Now: s.clock.Now(), Wallet: w.ID, Policy: pol, Audit: principalOf(ctx).audit("api"),
	})
	switch {
	case errors.Is(err, store.ErrPolicyConfigured):
		return errorf(http.StatusConflict, "wallet %q: %v", w.ID, err)
	case err != nil:
		return err
	}
	value, fees, err := s.store.WalletPolicySpend(ctx, store.WalletPolicySpendParams{
		Now: s.clock.Now(), Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex(), Policy: stored.Policy,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, policyView(stored, value, fees))
}

// DeleteWalletPolicy answers DELETE /v1/wallets/{wallet}/policy.
func (s *Server) DeleteWalletPolicy(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = s.store.WalletPolicyDelete(ctx, store.WalletPolicyDeleteParams{Now: s.clock.Now(), Wallet: w.ID, Audit: principalOf(ctx).audit("api")})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "not found: wallet %q has no policy", w.ID)
	case errors.Is(err, store.ErrPolicyConfigured):
		return errorf(http.StatusConflict, "wallet %q: %v", w.ID, err)
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// policyRefusal is the answer to a store error: a refusal by a wallet's
// policy is a 403 naming the rule, counted; any other error is itself.
func (s *Server) policyRefusal(err error) error {
	var refused *store.PolicyRefusedError
	if !errors.As(err, &refused) {
		return err
	}
	s.metrics.PolicyRefusal(refused.Wallet, refused.Rule)
	return &Error{Status: http.StatusForbidden, Message: refused.Error(), Refused: refused}
}

// refusalBody adds a refusal's rule and figures to an error body.
func refusalBody(body *apigen.Error, r *store.PolicyRefusedError) {
	body.Rule = &r.Rule
	for _, f := range []struct {
		to  **string
		has bool
		v   func() string
	}{
		{&body.Limit, r.Limit != nil, func() string { return r.Limit.String() }},
		{&body.Used, r.Used != nil, func() string { return r.Used.String() }},
		{&body.Requested, r.Requested != nil, func() string { return r.Requested.String() }},
	} {
		if f.has {
			*f.to = ptr(f.v())
		}
	}
	if r.Window > 0 {
		body.WindowSeconds = ptr(int64(r.Window.Seconds()))
	}
	if r.Selector != "" {
		body.Selector = &r.Selector
	}
}

func policySpec(b apigen.WalletPolicy) policy.Spec {
	s := policy.Spec{Recipients: deref(b.Recipients), MaxValuePerTx: deref(b.MaxValuePerTx)}
	for _, c := range deref(b.Contracts) {
		s.Contracts = append(s.Contracts, policy.ContractSpec{Address: c.Address, Functions: deref(c.Functions)})
	}
	for _, c := range deref(b.ValueCaps) {
		s.ValueCaps = append(s.ValueCaps, policy.CapSpec{Window: c.Window, Max: c.Max})
	}
	for _, c := range deref(b.FeeCaps) {
		s.FeeCaps = append(s.FeeCaps, policy.CapSpec{Window: c.Window, Max: c.Max})
	}
	return s
}

func policyView(p store.StoredPolicy, value, fees []store.PolicySpend) apigen.WalletPolicyView {
	spec := policy.FromStore(p.Policy)
	var body apigen.WalletPolicy
	if len(spec.Recipients) > 0 {
		body.Recipients = &spec.Recipients
	}
	if len(spec.Contracts) > 0 {
		cs := make([]apigen.WalletPolicyContract, len(spec.Contracts))
		for i, c := range spec.Contracts {
			cs[i] = apigen.WalletPolicyContract{Address: c.Address}
			if len(c.Functions) > 0 {
				cs[i].Functions = &spec.Contracts[i].Functions
			}
		}
		body.Contracts = &cs
	}
	if spec.MaxValuePerTx != "" {
		body.MaxValuePerTx = &spec.MaxValuePerTx
	}
	caps := func(in []policy.CapSpec) *[]apigen.WalletPolicyCap {
		if len(in) == 0 {
			return nil
		}
		out := make([]apigen.WalletPolicyCap, len(in))
		for i, c := range in {
			out[i] = apigen.WalletPolicyCap{Window: c.Window, Max: c.Max}
		}
		return &out
	}
	body.ValueCaps, body.FeeCaps = caps(spec.ValueCaps), caps(spec.FeeCaps)
	used := func(in []store.PolicySpend) []apigen.WalletPolicyCapUse {
		out := make([]apigen.WalletPolicyCapUse, len(in))
		for i, u := range in {
			out[i] = apigen.WalletPolicyCapUse{Window: u.Cap.Window.String(), Max: u.Cap.Max.String(), Used: u.Used.String()}
		}
		return out
	}
	return apigen.WalletPolicyView{
		Success: true, Wallet: p.Wallet, Source: apigen.WalletPolicyViewSource(p.Source), UpdatedBy: p.UpdatedBy, UpdatedAt: p.UpdatedAt,
		Policy: body, ValueCapsUsed: used(value), FeeCapsUsed: used(fees),
	}
}
