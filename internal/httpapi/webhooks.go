package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/egress"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/store"
)

// maxWebhookURL bounds an endpoint's URL.
const maxWebhookURL = 2048

// webhookEndpointJSON is apigen.WebhookEndpoint as the API writes it: its
// time by apiTime (see batchJSON).
type webhookEndpointJSON struct {
	apigen.WebhookEndpoint
	CreatedAt apiTime `json:"created_at"`
}

// toWebhookEndpoint is e as the API shows it: its URL's password, if any,
// as xxxxx (the stored URL keeps it, for delivery), and its secret only
// withSecret (the answer of the create).
func toWebhookEndpoint(e store.WebhookEndpoint, withSecret bool) webhookEndpointJSON {
	types := make([]apigen.WebhookEventType, len(e.EventTypes))
	for i, t := range e.EventTypes {
		types[i] = apigen.WebhookEventType(t)
	}
	o := apigen.WebhookEndpoint{ID: e.ID, Wallet: e.Wallet, URL: egress.RedactURL(e.URL), EventTypes: types, Enabled: e.Enabled}
	if withSecret {
		o.Secret = &e.Secret
	}
	return webhookEndpointJSON{WebhookEndpoint: o, CreatedAt: apiTime(e.CreatedAt)}
}

// checkWebhookURL refuses what no delivery could reach or may reach: a
// malformed URL, a host name that does not resolve, and (unless
// AllowPrivate) a target that is or resolves to a non-public address
// (egress.CheckTarget). Its messages never repeat the URL, whose password
// would then be in logs.
func (s *Server) checkWebhookURL(ctx context.Context, raw string) error {
	if problem := textProblem(raw); problem != "" {
		return errorf(http.StatusBadRequest, "field url: %s", problem)
	}
	if len(raw) > maxWebhookURL {
		return errorf(http.StatusBadRequest, "field url: longer than %d bytes", maxWebhookURL)
	}
	if err := egress.CheckTarget(ctx, raw, s.cfg.Webhooks.AllowPrivate, s.resolver); err != nil {
		if errors.Is(err, egress.ErrNotPublic) {
			return errorf(http.StatusBadRequest, "field url: %v; webhooks reach public addresses only", err)
		}
		return errorf(http.StatusBadRequest, "field url: %v", err)
	}
	return nil
}

// CreateWalletWebhook answers POST /v1/wallets/{wallet}/webhooks.
func (s *Server) CreateWalletWebhook(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	var body apigen.WebhookEndpointRequest
	if err := decodeStrictJSON(c, &body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.checkWebhookURL(ctx, body.URL); err != nil {
		return err
	}
	max := s.cfg.Webhooks.MaxEndpoints
	p := store.WebhookEndpointCreateParams{Now: s.clock.Now(), Wallet: w.ID, URL: body.URL, Secret: deref(body.Secret), MaxEndpoints: max}
	for _, t := range deref(body.EventTypes) {
		if !t.Valid() {
			return errorf(http.StatusBadRequest, "field event_types: want submitted, confirmed, failed, replaced or reorged, got %q", t)
		}
		p.EventTypes = append(p.EventTypes, store.WebhookEventType(t))
	}
	if p.Secret != "" && !store.ValidWebhookSecret(p.Secret) {
		return errorf(http.StatusBadRequest, "field secret: want whsec_ and the base64 of 24 to 64 bytes")
	}
	e, err := s.store.WebhookEndpointCreate(ctx, p)
	switch {
	case errors.Is(err, store.ErrWebhookEndpointLimit):
		return errorf(http.StatusConflict, "wallet %s has %d webhook endpoints, the most a wallet may have: delete one to add another", walletName, max)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusCreated, toWebhookEndpoint(e, true))
}

// ListWalletWebhooks answers GET /v1/wallets/{wallet}/webhooks.
func (s *Server) ListWalletWebhooks(c echo.Context, walletName apigen.Wallet) error {
	w, err := s.walletToRead(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	list, err := s.store.WebhookEndpointList(c.Request().Context(), w.ID)
	if err != nil {
		return err
	}
	out := struct {
		Webhooks []webhookEndpointJSON `json:"webhooks"`
	}{Webhooks: make([]webhookEndpointJSON, len(list))}
	for i, e := range list {
		out.Webhooks[i] = toWebhookEndpoint(e, false)
	}
	return c.JSON(http.StatusOK, out)
}

// DeleteWalletWebhook answers DELETE /v1/wallets/{wallet}/webhooks/{id}.
func (s *Server) DeleteWalletWebhook(c echo.Context, walletName apigen.Wallet, id string) error {
	w, err := s.walletFor(c, walletName, "path parameter wallet")
	if err != nil {
		return err
	}
	if err := checkTaskID(id, "path parameter id"); err != nil {
		return err
	}
	err = s.store.WebhookEndpointDelete(c.Request().Context(), w.ID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
