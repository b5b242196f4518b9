package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// TestClassifySendMessage_DesignTable is the wallet lane's send-result table
// (docs/design.md, the wallet lane's rule 4), with
// the messages as go-ethereum writes them (details after the phrase).
func TestClassifySendMessage_DesignTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		msg  string
		want ledger.SendResult
	}{
		// success
		{"already known", ledger.SendAccepted},
		{"known transaction: 0xabc", ledger.SendAccepted},
		{"Known transaction", ledger.SendAccepted},
		// nonce too low: the worker decides
		{"nonce too low", ledger.SendNonceTooLow},
		{"nonce too low: next nonce 1, tx nonce 0", ledger.SendNonceTooLow},
		// bump
		{"replacement transaction underpriced", ledger.SendUnderpriced},
		{"transaction underpriced: tip needed 2, tip permitted 1", ledger.SendUnderpriced},
		{"transaction gas price below minimum: gas tip cap 1, minimum needed 2", ledger.SendUnderpriced},
		// recycle the nonce
		{"insufficient funds for gas * price + value: balance 0, tx cost 21000, overshot 21000", ledger.SendRejected},
		{"insufficient funds for transfer", ledger.SendRejected},
		{"intrinsic gas too low: gas 100, minimum needed 21000", ledger.SendRejected},
		{"max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1, baseFee: 7", ledger.SendRejected},
		{"fee cap less than block base fee", ledger.SendRejected},
		{"invalid sender", ledger.SendRejected},
		{"exceeds block gas limit", ledger.SendRejected},
		{"gas limit reached", ledger.SendRejected},
		{"max priority fee per gas higher than max fee per gas", ledger.SendRejected},
		{"tx fee (2.00 ether) exceeds the configured cap (1.00 ether)", ledger.SendRejected},
		// indeterminate: treated as sent, never recycled
		{"context deadline exceeded", ledger.SendIndeterminate},
		{"Post \"http://127.0.0.1:8545\": dial tcp 127.0.0.1:8545: connect: connection refused", ledger.SendIndeterminate},
		{"502 Bad Gateway: upstream", ledger.SendIndeterminate},
		{"something no node ever said", ledger.SendIndeterminate},
		{"", ledger.SendIndeterminate},
		// prefixes only: a phrase inside another message does not count
		{"upstream said: nonce too low", ledger.SendIndeterminate},
	}
	for _, c := range cases {
		if got := ledger.ClassifySendMessage(c.msg); got != c.want {
			t.Errorf("ClassifySendMessage(%q) = %s, want %s", c.msg, got, c.want)
		}
	}
}

func TestSendError_CarriesResultAndLedgerClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		result ledger.SendResult
		class  ledger.Class
	}{
		{ledger.SendNonceTooLow, ledger.Deterministic},
		{ledger.SendUnderpriced, ledger.Deterministic},
		{ledger.SendRejected, ledger.Deterministic},
		{ledger.SendIndeterminate, ledger.Indeterminate},
	}
	for _, c := range cases {
		err := fmt.Errorf("sending 0xabc: %w", ledger.NewSendError(c.result, "node said so", nil))
		if got := ledger.SendResultOf(err); got != c.result {
			t.Errorf("SendResultOf(%v) = %s, want %s", err, got, c.result)
		}
		if got := ledger.ClassOf(err); got != c.class {
			t.Errorf("ClassOf(%v) = %s, want %s", err, got, c.class)
		}
		if got := ledger.ReasonOf(err); got != "node said so" {
			t.Errorf("ReasonOf(%v) = %q", err, got)
		}
	}
	if got := ledger.SendResultOf(nil); got != ledger.SendAccepted {
		t.Errorf("SendResultOf(nil) = %s, want accepted", got)
	}
	if got := ledger.SendResultOf(context.DeadlineExceeded); got != ledger.SendIndeterminate {
		t.Errorf("SendResultOf(unclassified) = %s, want indeterminate", got)
	}
	if !errors.Is(ledger.NewSendError(ledger.SendIndeterminate, "timeout", context.DeadlineExceeded), context.DeadlineExceeded) {
		t.Error("a SendError does not unwrap to its cause")
	}
}

// A node's message that is both the reason and the wrapped error is said
// once: "…: replacement transaction underpriced", not twice.
func TestError_AReasonThatIsTheWrappedErrorIsSaidOnce(t *testing.T) {
	msg := "replacement transaction underpriced"
	cause := errors.New(msg)
	err := ledger.NewSendError(ledger.ClassifySendMessage(msg), msg, cause)
	if n := strings.Count(err.Error(), msg); n != 1 {
		t.Errorf("%q says the message %d times, want once", err.Error(), n)
	}
	if !errors.Is(err, cause) {
		t.Errorf("%v does not unwrap to its cause", err)
	}
	other := ledger.NewError(ledger.Transient, "validator busy", errors.New("503 Service Unavailable"))
	if !strings.Contains(other.Error(), "validator busy: 503 Service Unavailable") {
		t.Errorf("%q lost a cause that adds something", other.Error())
	}
}
