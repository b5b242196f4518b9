// Package ledger defines what ledgerq needs from a ledger, one interface per
// lane in a file named for it (batch.go: BatchLedger, wallet.go:
// WalletLedger), and the classes of error a ledger call can end in (this
// file). Adapters live in sub-packages: sim (the simulated Sawtooth ledger),
// sawtooth (Hyperledger Sawtooth's REST API), evm (Ethereum JSON-RPC through
// go-ethereum's ethclient) and evmsim (a simulated EVM chain). Each lane
// chooses its adapter with its own flag.
package ledger

import (
	"errors"
	"fmt"
	"time"
)

// Class says what a failed ledger call means for the item that was sent.
type Class int

const (
	// Transient: the ledger did not take the item and said so (busy, unavailable,
	// rate limited). Sending the same item again later is safe and expected.
	Transient Class = iota + 1
	// Deterministic: the ledger refused the item itself. Sending it again will
	// get the same answer.
	Deterministic
	// Indeterminate: the call failed in a way that leaves it unknown whether the
	// ledger took the item (a timeout, a dropped connection after the request was
	// written). The caller must treat the item as possibly sent and find out.
	Indeterminate
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Deterministic:
		return "deterministic"
	case Indeterminate:
		return "indeterminate"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Error is a classified ledger error.
type Error struct {
	Class Class
	// Reason is the ledger's own explanation, kept for operators.
	Reason string
	Err    error
}

func (e *Error) Error() string {
	// A node's message is often both the reason and the wrapped error: say
	// it once.
	if e.Err != nil && e.Err.Error() != e.Reason {
		return fmt.Sprintf("%s ledger error: %s: %v", e.Class, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s ledger error: %s", e.Class, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// NewError returns a classified error.
func NewError(class Class, reason string, err error) *Error {
	return &Error{Class: class, Reason: reason, Err: err}
}

// ClassOf returns the class of err. An error that carries no class is
// Indeterminate: when in doubt, assume the ledger may have the item.
func ClassOf(err error) Class {
	var le *Error
	if errors.As(err, &le) {
		return le.Class
	}
	return Indeterminate
}

// ReasonOf returns the ledger's reason for err, or err's text.
func ReasonOf(err error) string {
	var le *Error
	if errors.As(err, &le) && le.Reason != "" {
		return le.Reason
	}
	return err.Error()
}

// RetryAfterOf returns how long the ledger asked its caller to wait before
// asking again (an HTTP Retry-After), read from the first error in err's
// chain that implements interface{ RetryAfter() time.Duration }; 0 when none
// does or the wait is not positive. A node client that reads the header
// gives its errors that method; go-ethereum's rpc.HTTPError does not carry
// the header, so an answer through it has no hint.
func RetryAfterOf(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return max(ra.RetryAfter(), 0)
	}
	return 0
}
