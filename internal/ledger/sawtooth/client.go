package sawtooth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Defaults for a Client's status queries.
const (
	// DefaultStatusGETLimit is how many ids go in one GET /batch_statuses.
	// 15 ids of 128 characters keep the URL under 2,000 characters, which
	// every proxy between here and a validator passes.
	DefaultStatusGETLimit = 15
	// DefaultStatusPOSTLimit is how many ids go in one POST /batch_statuses;
	// longer lists are split into several requests.
	DefaultStatusPOSTLimit = 1000
)

// maxResponseBody bounds how much of a response the Client reads.
const maxResponseBody = 16 << 20

// Client is a ledger.BatchLedger over Sawtooth's REST API. It is safe for
// concurrent use.
type Client struct {
	base      string
	http      *http.Client
	log       *slog.Logger
	getLimit  int
	postLimit int
}

var _ ledger.BatchLedger = (*Client)(nil)

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithStatusLimits sets how many ids a status query sends with GET (at most
// get) and how many with one POST (at most post). Values below 1 keep the
// default.
func WithStatusLimits(get, post int) ClientOption {
	return func(c *Client) {
		if get > 0 {
			c.getLimit = get
		}
		if post > 0 {
			c.postLimit = post
		}
	}
}

// NewClient returns a Client for the REST API at baseURL (for example
// http://rest-api:8008). A nil httpClient means one with a 30 s timeout; a nil
// logger discards.
func NewClient(baseURL string, httpClient *http.Client, logger *slog.Logger, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing sawtooth REST API URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("sawtooth REST API URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		http:      httpClient,
		log:       logger,
		getLimit:  DefaultStatusGETLimit,
		postLimit: DefaultStatusPOSTLimit,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.getLimit > c.postLimit {
		c.getLimit = c.postLimit
	}
	return c, nil
}

// SubmitBatches sends the batches in one BatchList. When Sawtooth refuses the
// list for its content, it does not say which batch it refused, so the Client
// bisects: it sends each half again, and so on down to single batches, so that
// only the batches Sawtooth refuses on their own end Deterministic and the
// others are delivered.
//
// A batch whose payload is not a Sawtooth batch, or whose ID is not its
// header_signature, is refused here without being sent. A call error is
// returned only when it applies to every batch; otherwise each batch carries
// its own.
func (c *Client) SubmitBatches(ctx context.Context, batches []ledger.Batch) ([]error, error) {
	errs := make([]error, len(batches))
	send := make([]int, 0, len(batches))
	for i, b := range batches {
		pb, err := ParseBatch(b.Payload)
		if err != nil {
			errs[i] = ledger.NewError(ledger.Deterministic, err.Error(), ErrMalformedBatch)
			continue
		}
		if pb.HeaderSignature != b.ID {
			errs[i] = ledger.NewError(ledger.Deterministic,
				fmt.Sprintf("batch id %s is not the batch's header_signature %s", short(b.ID), short(pb.HeaderSignature)), ErrInvalidBatch)
			continue
		}
		send = append(send, i)
	}
	if len(send) == 0 {
		return errs, nil
	}
	res := c.post(ctx, batches, send)
	switch {
	case res.err != nil && len(send) == len(batches):
		return nil, res.err
	case res.err != nil:
		for _, i := range send {
			errs[i] = res.err
		}
	case res.refusal != nil:
		c.bisect(ctx, batches, send, *res.refusal, errs)
	}
	return errs, nil
}

// bisect settles idx, a list the ledger refused with refusal, by sending each
// half again.
func (c *Client) bisect(ctx context.Context, batches []ledger.Batch, idx []int, refusal APIError, errs []error) {
	if len(idx) == 1 {
		c.log.InfoContext(ctx, "sawtooth: batch refused", "batch_id", batches[idx[0]].ID, "code", refusal.Code, "reason", refusal.Message)
		errs[idx[0]] = ledger.NewError(ledger.Deterministic, refusal.String(), nil)
		return
	}
	c.log.DebugContext(ctx, "sawtooth: batch list refused, bisecting", "batches", len(idx), "code", refusal.Code)
	mid := len(idx) / 2
	for _, half := range [][]int{idx[:mid], idx[mid:]} {
		res := c.post(ctx, batches, half)
		switch {
		case res.err != nil:
			for _, i := range half {
				errs[i] = res.err
			}
		case res.refusal != nil:
			c.bisect(ctx, batches, half, *res.refusal, errs)
		}
	}
}

// postResult is the outcome of one POST /batches: accepted (both fields nil),
// refused for the list's content, or failed as a whole.
type postResult struct {
	refusal *APIError
	err     error // a *ledger.Error
}

func (c *Client) post(ctx context.Context, batches []ledger.Batch, idx []int) postResult {
	size := 0
	for _, i := range idx {
		size += len(batches[i].Payload) + 11 // tag and length varint
	}
	body := make([]byte, 0, size)
	for _, i := range idx {
		body = AppendBatchList(body, batches[i].Payload)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/batches", bytes.NewReader(body))
	if err != nil {
		return postResult{err: ledger.NewError(ledger.Transient, "building POST /batches", err)}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	// Whether the whole request reached the connection decides between
	// Transient (the ledger cannot have the batches) and Indeterminate.
	resp, err := ledger.SendHTTP(c.http, req, "POST /batches")
	if err != nil {
		return postResult{err: err}
	}
	defer ledger.CloseBody(resp)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return postResult{}
	}
	apiErr := readAPIError(resp)
	switch {
	case resp.StatusCode == http.StatusBadRequest &&
		(apiErr.Code == CodeSubmittedBatchesInvalid || apiErr.Code == CodeBadProtobufSubmitted):
		return postResult{refusal: &apiErr}
	case resp.StatusCode == http.StatusRequestEntityTooLarge:
		// Smaller lists may fit; a single batch that does not is refused.
		return postResult{refusal: &apiErr}
	case resp.StatusCode == http.StatusGatewayTimeout || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable && apiErr.Code == CodeValidatorTimedOut:
		// Sawtooth's own words for 17: "Your request may or may not have
		// been processed." A proxy's 502 or 504 means the same: the ledger
		// behind it may have taken the batches before the proxy gave up.
		return postResult{err: ledger.NewError(ledger.Indeterminate, apiErr.String(), statusError(resp))}
	default:
		// 429 and 5xx are the ledger saying "not now". Anything else (a
		// 400 that blames the request rather than the batches, a 404 from a
		// wrong base URL, a proxy's 401) is no verdict on the batches either:
		// they wait and are sent again, and the log tells the operator.
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			c.log.WarnContext(ctx, "sawtooth: unexpected answer to POST /batches",
				"status", resp.StatusCode, "code", apiErr.Code, "message", apiErr.Message)
		}
		return postResult{err: ledger.NewError(ledger.Transient, apiErr.String(), statusError(resp))}
	}
}

// BatchStatuses asks for the status of each id: with GET for short lists and
// POST for long ones, split into several requests if needed. An id that is
// not a well-formed Sawtooth id cannot be known to the ledger and is UNKNOWN
// without being asked about; so is any id the ledger leaves out of its answer.
func (c *Client) BatchStatuses(ctx context.Context, ids []string) (map[string]ledger.BatchStatusResult, error) {
	out := make(map[string]ledger.BatchStatusResult, len(ids))
	ask := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, dup := out[id]; dup {
			continue
		}
		out[id] = ledger.BatchStatusResult{Status: ledger.BatchUnknown}
		if IsID(id) {
			ask = append(ask, id)
		}
	}
	for start := 0; start < len(ask); start += c.postLimit {
		chunk := ask[start:min(start+c.postLimit, len(ask))]
		entries, err := c.statuses(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, asked := out[e.ID]; !asked {
				continue
			}
			r, err := statusResult(e)
			if err != nil {
				return nil, ledger.NewError(ledger.Transient, "reading batch statuses", err)
			}
			out[e.ID] = r
		}
	}
	return out, nil
}

func (c *Client) statuses(ctx context.Context, ids []string) ([]BatchStatusEntry, error) {
	var (
		req *http.Request
		err error
	)
	if len(ids) <= c.getLimit {
		// Ids are checked hex, so they need no escaping, and Sawtooth wants
		// the commas literal.
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/batch_statuses?id="+strings.Join(ids, ","), nil)
	} else {
		body, merr := json.Marshal(ids)
		if merr != nil {
			return nil, fmt.Errorf("encoding batch ids: %w", merr)
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/batch_statuses", bytes.NewReader(body))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("building batch status request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, ledger.NewError(ledger.Transient, req.Method+" /batch_statuses failed", err)
	}
	defer ledger.CloseBody(resp)
	if resp.StatusCode != http.StatusOK {
		apiErr := readAPIError(resp)
		class := ledger.Transient
		if resp.StatusCode == http.StatusBadRequest {
			class = ledger.Deterministic
		}
		return nil, ledger.NewError(class, apiErr.String(), statusError(resp))
	}
	var body BatchStatusesResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBody)).Decode(&body); err != nil {
		return nil, ledger.NewError(ledger.Transient, "decoding batch statuses", err)
	}
	return body.Data, nil
}

// statusResult converts one status entry; for INVALID, the reason is the
// invalid transactions' messages joined.
func statusResult(e BatchStatusEntry) (ledger.BatchStatusResult, error) {
	switch e.Status {
	case ledger.BatchCommitted, ledger.BatchPending, ledger.BatchUnknown:
		return ledger.BatchStatusResult{Status: e.Status}, nil
	case ledger.BatchInvalid:
		msgs := make([]string, 0, len(e.InvalidTransactions))
		for _, t := range e.InvalidTransactions {
			if t.Message != "" {
				msgs = append(msgs, t.Message)
			}
		}
		reason := strings.Join(msgs, "; ")
		if reason == "" {
			reason = "the ledger reported the batch INVALID without a message"
		}
		return ledger.BatchStatusResult{Status: ledger.BatchInvalid, Reason: reason}, nil
	}
	return ledger.BatchStatusResult{}, fmt.Errorf("batch %s: unknown status %q", short(e.ID), e.Status)
}

// readAPIError reads a Sawtooth error body, or describes the HTTP status when
// the body is not one (a proxy's page, an empty body).
func readAPIError(resp *http.Response) APIError {
	var body ErrorResponse
	err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	if err != nil || body.Error.Code == 0 && body.Error.Title == "" {
		return APIError{Title: http.StatusText(resp.StatusCode), Message: "HTTP " + resp.Status}
	}
	return body.Error
}

// ErrHTTPStatus is wrapped by errors that come from a non-success HTTP answer.
var ErrHTTPStatus = errors.New("unexpected HTTP status")

func statusError(resp *http.Response) error {
	return fmt.Errorf("%w: %s", ErrHTTPStatus, resp.Status)
}
