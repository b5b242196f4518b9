package evmsim

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// faultsKey carries a request's *requestFaults to the JSON-RPC methods.
type faultsKey struct{}

// requestFaults is the simulated fault one HTTP request drew, if any: the
// first send that draws one records it, and withFaults answers the request
// with it instead of the JSON-RPC answer.
type requestFaults struct{ f atomic.Int32 }

// errFaultEnded answers a send made after a fault ended its request; the
// client never sees it (withFaults answers the fault).
var errFaultEnded = errors.New("evmsim: the request already ended in a simulated fault")

// faultsOf is the request's fault record; nil (nothing recorded) outside
// withFaults.
func faultsOf(ctx context.Context) *requestFaults {
	f, _ := ctx.Value(faultsKey{}).(*requestFaults)
	return f
}

// record keeps f unless the request already drew a fault.
func (r *requestFaults) record(f fault) {
	if r != nil {
		r.f.CompareAndSwap(int32(noFault), int32(f))
	}
}

// ended is errFaultEnded once the request drew a fault, else nil.
func (r *requestFaults) ended() error {
	if r != nil && fault(r.f.Load()) != noFault {
		return errFaultEnded
	}
	return nil
}

// withFaults serves JSON-RPC over POST only with next (go-ethereum's
// rpc.Server) and answers the simulated faults its sends draw at the HTTP
// layer, where a real node's failures reach a client: a transient failure
// is a 503 with ErrTransient, a lost response cuts the connection (the
// ledger took the transaction, the client hears nothing). geth's server
// recovers a panic in a method into a JSON-RPC error, so a method only
// records the fault; next's answer is held until it is known whether one
// was drawn.
func withFaults(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "JSON-RPC over POST only", http.StatusMethodNotAllowed)
			return
		}
		faults := &requestFaults{}
		held := httptest.NewRecorder() // the standard library's http.ResponseWriter that keeps the answer
		next.ServeHTTP(held, r.WithContext(context.WithValue(r.Context(), faultsKey{}, faults)))
		switch fault(faults.f.Load()) {
		case faultTransient:
			logger.Debug("evmsim: simulated transient failure answered 503")
			http.Error(w, ErrTransient, http.StatusServiceUnavailable)
			return
		case faultLost:
			logger.Debug("evmsim: simulated lost response: connection cut")
			// net/http's way to cut the connection without an answer.
			panic(http.ErrAbortHandler)
		}
		for k, v := range held.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(held.Code)
		_, _ = w.Write(held.Body.Bytes())
	})
}
