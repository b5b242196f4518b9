package ledger

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// SendHTTP sends req with client for an adapter whose request hands the
// ledger an item (a submit). A transport failure is classified by whether the
// whole request reached the connection: before, the ledger cannot have the
// item (Transient); after, it may have acted on it (Indeterminate). what
// names the call in the error ("POST /batches").
func SendHTTP(client *http.Client, req *http.Request, what string) (*http.Response, error) {
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	}))
	resp, err := client.Do(req)
	if err != nil {
		if wrote.Load() {
			return nil, NewError(Indeterminate, what+" failed after the request was sent", err)
		}
		return nil, NewError(Transient, what+" failed before the request was sent", err)
	}
	return resp, nil
}

// CloseBody drains a little of resp's body, so that its connection can be
// reused, and closes it.
func CloseBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// ClampRate is a simulated ledger's fault rate as it applies it: within
// [0, 1], NaN as 0.
func ClampRate(r float64) float64 {
	switch {
	case r < 0 || r != r: // NaN counts as 0
		return 0
	case r > 1:
		return 1
	}
	return r
}
