package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
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
	srv    *http.Server
	url    string
	client *http.Client
	key    string
	// prefix makes the run's idempotency keys unique.
	prefix   string
	body     []byte
	requests atomic.Int64
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
	h := &walletIntake{body: body, prefix: runPrefix("k")}
	keyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, h.key, err = n.Store().APIKeyCreate(keyCtx, store.APIKeyCreateParams{Now: time.Now(), Name: "ledgerq bench wallets", Scopes: store.WalletScopes(names...)})
	cancel()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the API: %w", err)
	}
	h.url = "http://" + ln.Addr().String()
	h.srv = &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }() // ends with ErrServerClosed on close
	clients := c.IngestWorkers
	h.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, IdleConnTimeout: time.Minute,
	}}
	return h, nil
}

// post sends the i-th task of wallet and succeeds when the API stored it
// (202: stored, not yet ended).
func (h *walletIntake) post(ctx context.Context, wallet string, i int) error {
	u := h.url + "/v1/wallets/" + url.PathEscape(wallet) + "/send-tx?task=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(h.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Idempotency-Key", h.prefix+"-"+strconv.Itoa(i))
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST send-tx: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	h.requests.Add(1)
	if err != nil {
		return fmt.Errorf("POST send-tx: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST send-tx: %s: %s", resp.Status, bytes.TrimSpace(answer[:min(len(answer), 512)]))
	}
	return nil
}

func (h *walletIntake) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	h.client.CloseIdleConnections()
}
