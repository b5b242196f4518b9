package testfactory

import (
	"github.com/ledgerq/ledgerq/internal/store"
)

// WebhookEndpoint is an endpoint a wallet's owner registers for its tasks'
// events (a row of ledgerq.webhook_endpoints). Zero fields get the defaults
// their doc gives.
type WebhookEndpoint struct {
	// Wallet defaults to "main".
	Wallet string
	// URL defaults to https://example.test/hook.
	URL string
	// EventTypes defaults to every event type.
	EventTypes []store.WebhookEventType
	Disabled   bool
}

// CreateWebhookEndpoint registers an endpoint through the store
// (store.WebhookEndpointCreate), as the API does, with a secret of its own,
// and returns it with the secret. It fails the test if the store refuses it.
func (f *Factory) CreateWebhookEndpoint(r WebhookEndpoint) store.WebhookEndpoint {
	f.tb.Helper()
	p := store.WebhookEndpointCreateParams{
		Now: f.clock.Now(), Wallet: r.Wallet, URL: r.URL, EventTypes: r.EventTypes, Disabled: r.Disabled,
	}
	if p.Wallet == "" {
		p.Wallet = "main"
	}
	if p.URL == "" {
		p.URL = "https://example.test/hook"
	}
	ep, err := f.st.WebhookEndpointCreate(f.tb.Context(), p)
	if err != nil {
		f.tb.Fatalf("testfactory: creating webhook endpoint %+v: %v", r, err)
	}
	return ep
}
