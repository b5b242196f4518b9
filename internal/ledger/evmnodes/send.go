package evmnodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// sendRounds is how many times a send goes again to the nodes that gave no
// answer (the same bytes: a node that has them answers "already known").
const sendRounds = 3

// nodeAnswer is one node's answer to a broadcast.
type nodeAnswer struct {
	n   *node
	err error
	// kind: accepted, verdict (a caught-up node refused it), notSent (it
	// certainly did not take it: a rate limit, a refused connection, a
	// lagging node's or a send-only endpoint's refusal) or unknown (it may
	// have taken it).
	kind string
	// wait is how long this send waits before asking n again.
	wait time.Duration
}

// SendRawTransaction implements ledger.WalletLedger: the same signed bytes
// go to every node of the chain at once, send-only ones included.
//
//   - Any node that takes them (or already has them) makes the send
//     accepted.
//   - A node that may have taken them without saying so (a timeout, a reset,
//     a 5xx) is sent them again, up to sendRounds times within ctx; if one
//     still has not answered, the send is indeterminate (treated as sent,
//     never recycled).
//   - A refusal counts only from a node that is read from and has reached
//     the best head: a lagging node's "insufficient funds" may be a balance
//     it has not seen yet. "nonce too low" from such a node outranks every
//     other refusal and an indeterminate answer (the lane then looks for
//     the nonce's receipts).
//   - When no node took them and none may have, the send is busy: sent
//     again later with the same bytes.
func (c *Chain) SendRawTransaction(ctx context.Context, raw []byte) error {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return ledger.NewSendError(ledger.SendRejected, "transaction does not decode", err)
	}
	final := map[*node]nodeAnswer{}
	notBefore := map[*node]time.Time{}
	var unknown, notSent error
	for round := 0; round < sendRounds && ctx.Err() == nil; round++ {
		now := time.Now()
		var targets []*node
		var next time.Time
		for _, n := range c.nodes {
			if _, done := final[n]; done {
				continue
			}
			n.mu.Lock()
			wrong, at := n.wrongChain, n.retryAt
			n.mu.Unlock()
			if nb := notBefore[n]; nb.After(at) {
				at = nb
			}
			switch {
			case wrong:
			case at.After(now):
				if next.IsZero() || at.Before(next) {
					next = at
				}
			default:
				targets = append(targets, n)
			}
		}
		if len(targets) == 0 {
			dl, hasDL := ctx.Deadline()
			wait := time.Until(next)
			if next.IsZero() || wait > c.cfg.MaxWait || hasDL && now.Add(wait).After(dl) {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			round--
			continue
		}
		answers := c.broadcast(ctx, raw, targets)
		for _, a := range answers {
			notBefore[a.n] = time.Now().Add(a.wait)
			switch a.kind {
			case "accepted":
				return nil
			case "verdict":
				final[a.n] = a
			case "unknown":
				unknown = fmt.Errorf("node %s: %w", a.n.name, a.err)
			case "notSent":
				notSent = fmt.Errorf("node %s: %w", a.n.name, a.err)
			}
		}
		if v := verdictOf(final); v != nil && v.Result == ledger.SendNonceTooLow {
			return v
		}
		if !c.anyReaderOpen(final) {
			break
		}
	}
	if unknown != nil {
		return ledger.NewSendError(ledger.SendIndeterminate, "no node said whether it took the transaction", unknown)
	}
	if v := verdictOf(final); v != nil {
		return v
	}
	if notSent == nil {
		notSent = errors.New("no node can be sent to")
	}
	return ledger.NewSendError(ledger.SendBusy, "no node took the transaction", notSent)
}

// anyReaderOpen reports whether a node read from has not given a final
// answer yet.
func (c *Chain) anyReaderOpen(final map[*node]nodeAnswer) bool {
	for _, n := range c.nodes {
		if _, done := final[n]; !done && !n.cfg.SendOnly {
			return true
		}
	}
	return false
}

// verdictOf is the refusal that counts among the final answers: nonce too
// low first, then underpriced, then any other refusal.
func verdictOf(final map[*node]nodeAnswer) *ledger.SendError {
	var best *ledger.SendError
	rank := map[ledger.SendResult]int{ledger.SendNonceTooLow: 3, ledger.SendUnderpriced: 2, ledger.SendRejected: 1}
	for _, a := range final {
		var se *ledger.SendError
		if errors.As(a.err, &se) && (best == nil || rank[se.Result] > rank[best.Result]) {
			best = se
		}
	}
	return best
}

// broadcast sends raw to every target at once and classes their answers.
func (c *Chain) broadcast(ctx context.Context, raw []byte, targets []*node) []nodeAnswer {
	out := make([]nodeAnswer, len(targets))
	best := c.Best()
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Go(func() {
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
			err := n.led.SendRawTransaction(cctx, raw)
			cancel()
			a := nodeAnswer{n: n, err: err}
			outcome := outcomeOK
			switch r := ledger.SendResultOf(err); r {
			case ledger.SendAccepted:
				a.kind = "accepted"
			case ledger.SendNonceTooLow, ledger.SendUnderpriced, ledger.SendRejected:
				outcome = outcomeVerdict
				n.mu.Lock()
				behind := n.headAt.IsZero() || n.head < best
				n.mu.Unlock()
				a.kind = "verdict"
				if n.cfg.SendOnly || behind && r != ledger.SendNonceTooLow {
					a.kind = "notSent"
				}
			case ledger.SendBusy:
				outcome, a.kind = outcomeRateLimited, "notSent"
			default:
				outcome = c.outcome(ctx, err, false)
				a.kind = "unknown"
				if notDelivered(err) {
					a.kind = "notSent"
				}
			}
			if ctx.Err() == nil {
				a.wait = c.record(n, outcome, time.Since(start), err)
			}
			out[i] = a
		})
	}
	wg.Wait()
	return out
}

// notDelivered reports whether a failed send certainly did not reach the
// node: a rate limit answered before the request was read, or a
// connection that was never made.
func notDelivered(err error) bool {
	var httpErr rpc.HTTPError
	if errors.As(err, &httpErr) {
		return httpErr.StatusCode == http.StatusTooManyRequests
	}
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return rateLimitMessage(rpcErr.ErrorCode(), rpcErr.Error())
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	return strings.Contains(strings.ToLower(fmt.Sprint(err)), "connection refused")
}
