package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
)

// WalletMode is how a wallet run's tasks reach the lane.
type WalletMode string

// The wallet run's modes.
const (
	// WalletModeStore stores each task with store.TaskInsert from the
	// bench's own pool: the API's store path without HTTP.
	WalletModeStore WalletMode = "store"
	// WalletModeHTTP posts each task to POST /v1/wallets/{wallet}/send-tx
	// with task=true and an Idempotency-Key, through the node's real
	// handler on a loopback listener, as clients send them.
	WalletModeHTTP WalletMode = "http"
)

// walletIntake is WalletModeHTTP's side of the API: the node's handler
// served on 127.0.0.1 and the clients that post to it.
type walletIntake struct {
	*loopbackAPI
	// prefix makes the run's idempotency keys unique.
	prefix string
	body   []byte
}

// newWalletIntake serves n's handler on a loopback listener and makes an
// API key scoped to the run's wallets.
func newWalletIntake(ctx context.Context, n *node.Node, wallets []keystore.Wallet, c *WalletConfig) (*walletIntake, error) {
	value := "0"
	if c.Value != nil {
		value = c.Value.String()
	}
	body, err := json.Marshal(apigen.SendTxRequest{To: benchRecipient.Hex(), Value: &value})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(wallets))
	for i, w := range wallets {
		names[i] = w.ID
	}
	keyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, key, err := n.Store().APIKeyCreate(keyCtx, store.APIKeyCreateParams{Now: time.Now(), Name: "ledgerq bench wallets", Scopes: store.WalletScopes(names...)})
	cancel()
	if err != nil {
		return nil, err
	}
	api, err := serveLoopback(n.Handler(), c.IngestWorkers, key)
	if err != nil {
		return nil, err
	}
	return &walletIntake{loopbackAPI: api, body: body, prefix: runPrefix("k")}, nil
}

// post sends the i-th task of wallet and succeeds when the API stored it
// (202: stored, not yet ended).
func (h *walletIntake) post(ctx context.Context, wallet string, i int) error {
	path := "/v1/wallets/" + url.PathEscape(wallet) + "/send-tx?task=true"
	header := http.Header{"Idempotency-Key": {h.prefix + "-" + strconv.Itoa(i)}}
	return h.loopbackAPI.post(ctx, path, h.body, header, http.StatusAccepted, http.StatusOK)
}
