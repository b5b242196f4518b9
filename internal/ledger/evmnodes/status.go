package evmnodes

import "time"

// The states of a node (NodeStatus.State).
const (
	// NodeHealthy: it answers, at (or near) the highest head seen.
	NodeHealthy = "healthy"
	// NodeLagging: it answers, but its head is behind the highest seen by
	// more than the chain's lag tolerance: it is not read from, and no
	// decision rests on its answers.
	NodeLagging = "lagging"
	// NodeBackoff: it answered a rate limit or a 5xx; no call goes to it
	// before RetryAt.
	NodeBackoff = "backoff"
	// NodeDown: its last calls failed (refused, reset, timed out); it is
	// probed back.
	NodeDown = "down"
	// NodeWrongChain: it reports another chain id than the chain's
	// declaration: taken out until it reports the right one.
	NodeWrongChain = "wrong_chain"
	// NodeUnknown: not probed yet.
	NodeUnknown = "unknown"
)

// The states of a chain (ChainStatus.State).
const (
	// ChainHealthy: at least one node it reads from is healthy.
	ChainHealthy = "healthy"
	// ChainDegraded: some of its nodes are out, at least one is healthy.
	ChainDegraded = "degraded"
	// ChainUnavailable: no node it reads from is healthy: the chain's
	// wallets wait.
	ChainUnavailable = "unavailable"
)

// ChainStatus is a chain as GET /v1/chains, /readyz and the console show
// it.
type ChainStatus struct {
	// Name is the chain's declared name; ChainID its EIP-155 id.
	Name    string `json:"name"`
	ChainID int64  `json:"chain_id"`
	// State is ChainHealthy, ChainDegraded or ChainUnavailable.
	State string `json:"state"`
	// Head is the highest head seen on the chain (0 before any).
	Head uint64 `json:"head"`
	// Confirmations is how deep a transaction must be before its task is
	// done on this chain.
	Confirmations int          `json:"confirmations"`
	Nodes         []NodeStatus `json:"nodes"`
}

// NodeStatus is one node of a chain.
type NodeStatus struct {
	// Name is the node's declared name (or its host); URL its endpoint
	// with any user information and query redacted.
	Name string `json:"name"`
	URL  string `json:"url"`
	// SendOnly: transactions are broadcast to it, it is never read from.
	SendOnly bool `json:"send_only"`
	// State is one of the Node* states.
	State string `json:"state"`
	// Head is the node's last head seen, and Lag how far it is behind the
	// chain's Head.
	Head uint64 `json:"head"`
	Lag  uint64 `json:"lag"`
	// Calls and Errors count the calls made to it and those that failed
	// at the node (not the transaction's own refusals) since the process
	// started; ErrorRate is the share of failed calls among its recent
	// ones (0 to 1).
	Calls     uint64  `json:"calls"`
	Errors    uint64  `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	// LatencyMillis is a recent call's typical latency (an exponentially
	// weighted mean), in milliseconds.
	LatencyMillis float64 `json:"latency_ms"`
	// LastError is the last failure's text, and LastErrorAt when.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// RetryAt, for NodeBackoff, is when it is tried again (a Retry-After
	// honoured).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}
