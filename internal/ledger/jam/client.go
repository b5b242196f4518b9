package jam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Client is a ledger.BundleLedger over the HTTP API NewHandler serves.
type Client struct {
	base string
	http *http.Client
}

var _ ledger.BundleLedger = (*Client)(nil)

// NewClient returns a client of the chain served at base (for example
// "http://127.0.0.1:19800"). A nil httpClient means one with a 10 s timeout.
func NewClient(base string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), http: httpClient}
}

// Info is GET /info.
func (c *Client) Info(ctx context.Context) (ledger.ChainInfo, error) {
	var in InfoJSON
	if err := c.get(ctx, "/info", &in); err != nil {
		return ledger.ChainInfo{}, err
	}
	h, ok := ledger.ParseHash(in.Executed.Hash)
	if !ok {
		return ledger.ChainInfo{}, ledger.NewError(ledger.Transient, "GET /info: bad executed hash", fmt.Errorf("%q", in.Executed.Hash))
	}
	return ledger.ChainInfo{
		Genesis: in.Genesis, SlotLength: time.Duration(in.SlotLengthNS), Cores: in.Cores,
		Executed: ledger.BlockRef{Number: in.Executed.Number, Hash: h},
	}, nil
}

// RecentBlocks is GET /recent.
func (c *Client) RecentBlocks(ctx context.Context) ([]ledger.BlockRef, error) {
	var in []RefJSON
	if err := c.get(ctx, "/recent", &in); err != nil {
		return nil, err
	}
	out := make([]ledger.BlockRef, len(in))
	for i, r := range in {
		h, ok := ledger.ParseHash(r.Hash)
		if !ok {
			return nil, ledger.NewError(ledger.Transient, "GET /recent: bad hash", fmt.Errorf("%q", r.Hash))
		}
		out[i] = ledger.BlockRef{Number: r.Slot, Hash: h}
	}
	return out, nil
}

// Blocks is GET /blocks?after=&limit=.
func (c *Client) Blocks(ctx context.Context, after uint64, limit int) ([]ledger.JAMBlock, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "limit": {strconv.Itoa(limit)}}
	var in []BlockJSON
	if err := c.get(ctx, "/blocks?"+q.Encode(), &in); err != nil {
		return nil, err
	}
	out := make([]ledger.JAMBlock, len(in))
	for i, b := range in {
		var err error
		out[i].Slot = b.Slot
		if out[i].Hash, err = parseHash(b.Hash); err == nil {
			if out[i].Guarantees, err = parseHashes(b.Guarantees); err == nil {
				out[i].Accumulations, err = parseHashes(b.Accumulations)
			}
		}
		for _, sk := range b.Skipped {
			if err != nil {
				break
			}
			s := ledger.SkippedTx{Reason: sk.Reason, NonceGap: sk.NonceGap}
			if s.Package, err = parseHash(sk.PackageHash); err == nil {
				s.Tx, err = parseHash(sk.TxHash)
			}
			out[i].Skipped = append(out[i].Skipped, s)
		}
		if err != nil {
			return nil, ledger.NewError(ledger.Transient, "GET /blocks: bad hash", err)
		}
	}
	return out, nil
}

// Log is GET /debug/log: the builder service's executions and refusals.
func (c *Client) Log(ctx context.Context) (LogJSON, error) {
	var out LogJSON
	err := c.get(ctx, "/debug/log", &out)
	return out, err
}

// NonceAt is GET /nonce: sender's nonce in the builder service's EVM state
// (ledger.PoolChain).
func (c *Client) NonceAt(ctx context.Context, sender ledger.Address) (uint64, error) {
	var out NonceJSON
	err := c.get(ctx, "/nonce?address="+common.Address(sender).Hex(), &out)
	return out.Nonce, err
}

// Stats is GET /debug/stats.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.get(ctx, "/debug/stats", &out)
	return out, err
}

// SubmitWorkPackage is POST /work-packages, classified as the package doc
// says.
func (c *Client) SubmitWorkPackage(ctx context.Context, wp ledger.WorkPackage) error {
	body, err := json.Marshal(workPackageJSON(wp))
	if err != nil {
		return ledger.NewError(ledger.Deterministic, "encoding work package", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/work-packages", bytes.NewReader(body))
	if err != nil {
		return ledger.NewError(ledger.Transient, "building POST /work-packages", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Whether the whole request reached the connection decides between
	// Transient (the chain cannot have the package) and Indeterminate.
	resp, err := ledger.SendHTTP(c.http, req, "POST /work-packages")
	if err != nil {
		return err
	}
	defer ledger.CloseBody(resp)
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	e := readError(resp)
	cause := fmt.Errorf("POST /work-packages: %s: %s", resp.Status, e.Message)
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity || resp.StatusCode == http.StatusBadRequest:
		return ledger.NewError(ledger.Deterministic, e.Reason, cause)
	case resp.StatusCode == http.StatusServiceUnavailable:
		return ledger.NewError(ledger.Transient, e.Reason, cause)
	case resp.StatusCode >= 500:
		// A 500, 502 or 504 may come after the chain took the package.
		return ledger.NewError(ledger.Indeterminate, e.Reason, cause)
	default:
		// A 404 from a wrong base URL, a proxy's 429 or 401: no verdict on
		// the package, so it waits and is sent again.
		return ledger.NewError(ledger.Transient, e.Reason, cause)
	}
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return ledger.NewError(ledger.Transient, "building GET "+path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ledger.NewError(ledger.Transient, "GET "+path+" failed", err)
	}
	defer ledger.CloseBody(resp)
	if resp.StatusCode != http.StatusOK {
		e := readError(resp)
		return ledger.NewError(ledger.Transient, "GET "+path+": "+resp.Status, errors.New(e.Message))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return ledger.NewError(ledger.Transient, "decoding GET "+path, err)
	}
	return nil
}

// readError reads an ErrorJSON answer; a body that is not one becomes the
// message, and the status the reason.
func readError(resp *http.Response) ErrorJSON {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e ErrorJSON
	if json.Unmarshal(raw, &e) != nil || e.Reason == "" {
		e = ErrorJSON{Reason: resp.Status, Message: strings.TrimSpace(string(raw))}
	}
	return e
}

func parseHash(s string) (ledger.Hash, error) {
	h, ok := ledger.ParseHash(s)
	if !ok {
		return h, fmt.Errorf("%q is not a 0x-hex hash", s)
	}
	return h, nil
}

func parseHashes(ss []string) ([]ledger.Hash, error) {
	out := make([]ledger.Hash, len(ss))
	for i, s := range ss {
		h, err := parseHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}
