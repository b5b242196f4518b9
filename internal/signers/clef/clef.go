// Package clef is a keystore.Signer whose key stays in clef, go-ethereum's
// remote signer, reached over its JSON-RPC API (account_list,
// account_signTransaction). clef decides whether to sign: a rules file the
// operator attested approves or rejects each request, or a person does.
//
// ledgerq trusts clef with the key, not with the transaction: clef's UI and
// rules may change a request before signing it (clef's API allows it), so
// every answer is decoded and checked against the request — its type,
// chain id, nonce, recipient, value, data, gas, fees and access list, the
// transaction's signing hash as a whole, and its sender, recovered from the
// signature — and any difference refuses the answer (ErrMismatch). What is
// refused is never returned, so it can never be sent.
//
// go-ethereum's rpc client makes the calls (its apitypes.SendTxArgs is
// clef's own request type). A transport of this package's own keeps the
// Retry-After of a 429 or 503 answer for the call it answered, which the
// rpc client's error does not carry.
//
// What a failure means for the wallet lane:
//
//   - clef unreachable or failing (connection refused, a timeout, the
//     context's deadline, HTTP 5xx): *keystore.UnavailableError;
//   - throttled (HTTP 429, from a proxy in front of clef):
//     *keystore.UnavailableError with the answer's Retry-After, else
//     ThrottleRetryAfter;
//   - refused by a rule or a person ("request denied"):
//     *keystore.UnavailableError after DeniedRetryAfter: the wallet waits,
//     visibly, until the rules or the person approve, where a plain error
//     would end each of its queued tasks in error one after the other;
//   - anything else (another chain id than clef's --chainid, an account clef
//     cannot unlock, an answer that is not the transaction asked): a plain
//     error.
//
// The URL's userinfo (a proxy's basic auth) is never shown: errors name the
// URL redacted by evmnodes.Redact.
package clef

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// Backend names the signer in *keystore.UnavailableError and metrics.
const Backend = "clef"

const (
	// DefaultTimeout is the longest one call to clef waits when Config
	// names none (and the caller's context allows as long).
	DefaultTimeout = 10 * time.Second
	// ThrottleRetryAfter is the wait after a 429 that named none.
	ThrottleRetryAfter = time.Second
	// DeniedRetryAfter is the wait after clef refused a request: a rule or a
	// person said no, and asking again at once would be refused again.
	DeniedRetryAfter = 30 * time.Second
)

// ErrMismatch is wrapped by the error of an answer that is not the
// transaction asked, or not signed by the configured address.
var ErrMismatch = errors.New("clef's answer is not the transaction asked for")

// Config says where clef is and which of its accounts signs.
type Config struct {
	// URL is clef's HTTP endpoint (clef --http; http://127.0.0.1:8550 by
	// default), http or https. Userinfo, if any, is sent as basic auth and
	// never shown.
	URL string
	// Address is the account the wallet sends from: Open refuses a clef
	// that does not list it.
	Address common.Address
	// Timeout is the longest one call waits (0: DefaultTimeout); a caller's
	// shorter deadline wins.
	Timeout time.Duration
	// HTTPClient, when set, makes the calls (TLS settings, a proxy);
	// http.DefaultClient's transport otherwise.
	HTTPClient *http.Client
}

// Validate checks cfg without calling clef.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("clef: no URL")
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Errorf("clef: URL %s is not an http(s) URL", evmnodes.Redact(c.URL))
	case c.Address == (common.Address{}):
		return fmt.Errorf("clef at %s: no address", evmnodes.Redact(c.URL))
	case c.Timeout < 0:
		return fmt.Errorf("clef at %s: timeout %s is negative", evmnodes.Redact(c.URL), c.Timeout)
	}
	return nil
}

// Signer signs with one of clef's accounts. Safe for concurrent use.
type Signer struct {
	client  *rpc.Client
	url     string // redacted, for errors and String
	addr    common.Address
	timeout time.Duration
}

// Open dials clef, asks it for its accounts (account_list) and returns the
// signer of cfg.Address, or an error when clef does not list it. A clef
// that cannot be reached answers an error wrapping a
// *keystore.UnavailableError.
func Open(ctx context.Context, cfg Config) (*Signer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := http.Client{}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	hc.Transport = hintTransport{next: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport)}
	client, err := rpc.DialOptions(ctx, cfg.URL, rpc.WithHTTPClient(&hc))
	if err != nil {
		return nil, fmt.Errorf("clef at %s: %w", evmnodes.Redact(cfg.URL), redactErr(err))
	}
	s := &Signer{client: client, url: evmnodes.Redact(cfg.URL), addr: cfg.Address, timeout: cmp.Or(cfg.Timeout, DefaultTimeout)}
	var accounts []common.Address
	if err := s.call(ctx, &accounts, "account_list"); err != nil {
		client.Close()
		return nil, err
	}
	if !slices.Contains(accounts, cfg.Address) {
		client.Close()
		return nil, fmt.Errorf("clef at %s does not list the account %s (it lists %d: %s); is its keystore the one holding the key, and do its rules approve the listing?",
			s.url, cfg.Address.Hex(), len(accounts), hexes(accounts))
	}
	return s, nil
}

// Close closes the connection to clef.
func (s *Signer) Close() { s.client.Close() }

// Address implements keystore.Signer.
func (s *Signer) Address() ledger.Address { return ledger.Address(s.addr) }

// Backend names the backend for keystore.BackendOf (metrics, the wallet's
// status).
func (s *Signer) Backend() string { return Backend }

// String shows the redacted URL and the address, nothing else.
func (s *Signer) String() string { return "clef(" + s.url + ", " + s.addr.Hex() + ")" }

// signTxResult is clef's answer to account_signTransaction.
type signTxResult struct {
	Raw hexutil.Bytes      `json:"raw"`
	Tx  *types.Transaction `json:"tx"`
}

// SignTx implements keystore.Signer: clef signs tx for chainID
// (account_signTransaction) within ctx's deadline and Config.Timeout, and
// the answer is returned only when it is tx, signed by the configured
// address (see the package doc).
func (s *Signer) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	if chainID == nil || chainID.Sign() <= 0 {
		return nil, fmt.Errorf("clef at %s: signing nonce %d: no chain id", s.url, tx.Nonce())
	}
	args, err := s.txArgs(tx, chainID)
	if err != nil {
		return nil, err
	}
	var res signTxResult
	if err := s.call(ctx, &res, "account_signTransaction", args); err != nil {
		return nil, err
	}
	signed, err := s.check(tx, chainID, res)
	if err != nil {
		return nil, fmt.Errorf("clef at %s: signing nonce %d for %s: %w: refused, not sent", s.url, tx.Nonce(), s.addr.Hex(), err)
	}
	return signed, nil
}

// txArgs is tx as clef's request. Blob and set-code transactions are not
// signed through clef.
func (s *Signer) txArgs(tx *types.Transaction, chainID *big.Int) (apitypes.SendTxArgs, error) {
	args := apitypes.SendTxArgs{
		From:    common.NewMixedcaseAddress(s.addr),
		Gas:     hexutil.Uint64(tx.Gas()),
		Value:   hexutil.Big(*new(big.Int).Set(tx.Value())),
		Nonce:   hexutil.Uint64(tx.Nonce()),
		ChainID: (*hexutil.Big)(new(big.Int).Set(chainID)),
	}
	if to := tx.To(); to != nil {
		// NewMixedcaseAddress keeps the checksummed form: clef warns about,
		// and by default refuses, a recipient without a valid checksum.
		m := common.NewMixedcaseAddress(*to)
		args.To = &m
	}
	if data := tx.Data(); len(data) > 0 {
		in := hexutil.Bytes(bytes.Clone(data))
		args.Input = &in
	}
	switch tx.Type() {
	case types.LegacyTxType:
		args.GasPrice = (*hexutil.Big)(tx.GasPrice())
	case types.AccessListTxType:
		// clef makes an access-list transaction of a gasPrice and an access
		// list, however short.
		al := tx.AccessList()
		if al == nil {
			al = types.AccessList{}
		}
		args.GasPrice, args.AccessList = (*hexutil.Big)(tx.GasPrice()), &al
	case types.DynamicFeeTxType:
		args.MaxFeePerGas, args.MaxPriorityFeePerGas = (*hexutil.Big)(tx.GasFeeCap()), (*hexutil.Big)(tx.GasTipCap())
		if al := tx.AccessList(); len(al) > 0 {
			args.AccessList = &al
		}
	default:
		return args, fmt.Errorf("clef at %s: signing nonce %d: a transaction of type %d is not signed through clef (legacy, access-list and dynamic-fee ones are)", s.url, tx.Nonce(), tx.Type())
	}
	return args, nil
}

// check decodes clef's answer and returns it when it is want signed by the
// configured address for chainID, else an error wrapping ErrMismatch.
func (s *Signer) check(want *types.Transaction, chainID *big.Int, res signTxResult) (*types.Transaction, error) {
	if len(res.Raw) == 0 {
		return nil, fmt.Errorf("%w: it has no raw transaction", ErrMismatch)
	}
	// raw is what would be sent: that is what is checked and returned.
	got := new(types.Transaction)
	if err := got.UnmarshalBinary(res.Raw); err != nil {
		return nil, fmt.Errorf("%w: its raw transaction does not decode: %v", ErrMismatch, err)
	}
	if res.Tx != nil && res.Tx.Hash() != got.Hash() {
		return nil, fmt.Errorf("%w: its raw transaction (%s) and its decoded one (%s) differ", ErrMismatch, got.Hash().Hex(), res.Tx.Hash().Hex())
	}
	if diffs := differences(want, got, chainID); len(diffs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrMismatch, strings.Join(diffs, "; "))
	}
	signer := types.LatestSignerForChainID(chainID)
	// The fields compared above are the ones known today; the signing hash
	// covers every field, so a difference the list misses is still caught.
	if signer.Hash(got) != signer.Hash(want) {
		return nil, fmt.Errorf("%w: its signing hash %s is not the request's %s", ErrMismatch, signer.Hash(got).Hex(), signer.Hash(want).Hex())
	}
	from, err := types.Sender(signer, got)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: its signature does not recover a sender: %v", ErrMismatch, err)
	case from != s.addr:
		return nil, fmt.Errorf("%w: it is signed by %s, not by %s", ErrMismatch, from.Hex(), s.addr.Hex())
	}
	return got, nil
}

// differences lists the fields in which got is not want for chainID, each
// as "FIELD GOT, not WANT".
func differences(want, got *types.Transaction, chainID *big.Int) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s %v, not %v", field, g, w)) }
	if got.Type() != want.Type() {
		add("type", got.Type(), want.Type())
	}
	// An unprotected legacy signature (no EIP-155) has chain id 0 here: it
	// could be replayed on any chain.
	if got.ChainId().Cmp(chainID) != 0 {
		add("chain id", got.ChainId(), chainID)
	}
	if got.Nonce() != want.Nonce() {
		add("nonce", got.Nonce(), want.Nonce())
	}
	if g, w := addrText(got.To()), addrText(want.To()); g != w {
		add("to", g, w)
	}
	if got.Value().Cmp(want.Value()) != 0 {
		add("value", got.Value(), want.Value())
	}
	if !bytes.Equal(got.Data(), want.Data()) {
		add("data", hexutil.Encode(got.Data()), hexutil.Encode(want.Data()))
	}
	if got.Gas() != want.Gas() {
		add("gas", got.Gas(), want.Gas())
	}
	if got.GasFeeCap().Cmp(want.GasFeeCap()) != 0 {
		add("max fee per gas (gas price)", got.GasFeeCap(), want.GasFeeCap())
	}
	if got.GasTipCap().Cmp(want.GasTipCap()) != 0 {
		add("max priority fee per gas", got.GasTipCap(), want.GasTipCap())
	}
	if g, w := len(got.AccessList()), len(want.AccessList()); g != w {
		add("access list entries", g, w)
	}
	return d
}

func addrText(a *common.Address) string {
	if a == nil {
		return "(contract creation)"
	}
	return a.Hex()
}

func hexes(as []common.Address) string {
	if len(as) == 0 {
		return "none"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.Hex()
	}
	return strings.Join(s, ", ")
}

// call calls method within ctx and s.timeout, and classifies its failure
// (see the package doc).
func (s *Signer) call(ctx context.Context, result any, method string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	h := new(hint)
	err := s.client.CallContext(context.WithValue(ctx, hintKey{}, h), result, method, args...)
	if err == nil {
		return nil
	}
	return fmt.Errorf("clef at %s: %s: %w", s.url, method, classify(redactErr(err), ctx.Err(), h))
}

// classify returns err as a *keystore.UnavailableError when asking again
// later may succeed, else err. ctxErr is the call's context's error.
func classify(err, ctxErr error, h *hint) error {
	unavailable := func(after time.Duration) error {
		return &keystore.UnavailableError{Backend: Backend, Err: err, RetryAfter: after}
	}
	if he, ok := errors.AsType[rpc.HTTPError](err); ok {
		switch {
		case he.StatusCode == http.StatusTooManyRequests:
			return unavailable(cmp.Or(h.get(), ThrottleRetryAfter))
		case he.StatusCode >= 500:
			return unavailable(h.get())
		}
		return err // an answer, and a refusal: the configuration's problem
	}
	if re, ok := errors.AsType[rpc.Error](err); ok {
		// clef's core.ErrRequestDenied travels as a JSON-RPC error's message
		// (code -32000, which every other failure shares): the text is all
		// there is to tell it by.
		if strings.EqualFold(strings.TrimSpace(re.Error()), "request denied") {
			return unavailable(DeniedRetryAfter)
		}
		return err
	}
	if ctxErr != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errNoAnswer) {
		return unavailable(0)
	}
	return err
}

// errNoAnswer marks a request that got no HTTP answer (connection refused,
// reset, a timeout): redactErr puts it in place of net/http's *url.Error,
// whose text names the URL.
var errNoAnswer = errors.New("no answer")

// redactErr replaces net/http's *url.Error, whose text carries the URL
// and its user name, by its cause, marked errNoAnswer.
func redactErr(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%w: %w", errNoAnswer, ue.Err)
	}
	return err
}

// hint is the Retry-After of the answer to one call.
type hint struct{ after atomic.Int64 }

func (h *hint) get() time.Duration { return time.Duration(h.after.Load()) }

type hintKey struct{}

// hintTransport keeps the Retry-After of a 429 or 503 answer in the hint
// its request's context carries.
type hintTransport struct{ next http.RoundTripper }

func (t hintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if h, ok := req.Context().Value(hintKey{}).(*hint); ok {
			h.after.Store(int64(retryAfter(resp.Header.Get("Retry-After"), time.Now())))
		}
	}
	return resp, err
}

// retryAfter reads a Retry-After value, seconds or an HTTP date; 0 for
// none.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
