package ledger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// rateLimited is a node client's error for an answer with a Retry-After.
type rateLimited struct{ after time.Duration }

func (e rateLimited) Error() string             { return "429 Too Many Requests" }
func (e rateLimited) RetryAfter() time.Duration { return e.after }

func TestRetryAfterOf_ReadsTheHintAnywhereInTheChain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"nil", nil, 0},
		{"no hint", errors.New("connection reset by peer"), 0},
		{"the error itself", rateLimited{time.Second}, time.Second},
		{"wrapped in a classed error and a context", fmt.Errorf("evm: eth_estimateGas: %w",
			ledger.NewError(ledger.Transient, "429 Too Many Requests", rateLimited{3 * time.Second})), 3 * time.Second},
		{"one of several", errors.Join(errors.New("node a: reset"), rateLimited{2 * time.Second}), 2 * time.Second},
		{"a negative wait is none", rateLimited{-time.Second}, 0},
	} {
		if got := ledger.RetryAfterOf(tc.err); got != tc.want {
			t.Errorf("%s: RetryAfterOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}
