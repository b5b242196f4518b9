package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// chainListJSON is GET /v1/chains' answer. The statuses are encoded as
// package evmnodes tags them; the document's Chain and ChainNode schemas
// refuse any other field, so a field added there without the document
// fails the tests that check every answer against it.
type chainListJSON struct {
	Chains []evmnodes.ChainStatus `json:"chains"`
}

// chains returns the statuses Config.Chains gives now, never nil.
func (s *Server) chains() []evmnodes.ChainStatus {
	if s.cfg.Chains == nil {
		return []evmnodes.ChainStatus{}
	}
	out := s.cfg.Chains()
	if out == nil {
		return []evmnodes.ChainStatus{}
	}
	return out
}

// ListChains answers GET /v1/chains: every chain this process serves, with
// its nodes, as the node layer sees them now.
func (s *Server) ListChains(c echo.Context) error {
	return c.JSON(http.StatusOK, chainListJSON{Chains: s.chains()})
}

// GetChain answers GET /v1/chains/{chain}.
func (s *Server) GetChain(c echo.Context, name string) error {
	if problem := textProblem(name); problem != "" {
		return errorf(http.StatusBadRequest, "path parameter chain: %s", problem)
	}
	for _, ch := range s.chains() {
		if ch.Name == name {
			return c.JSON(http.StatusOK, ch)
		}
	}
	return errorf(http.StatusNotFound, "not found: this process serves no chain named %q", clip(name, logURIBytes))
}

// unavailableChains are the chains /readyz names: those none of whose
// nodes it reads from is healthy, each with every node's state and last
// error. Node URLs are left out: /readyz needs no key.
func (s *Server) unavailableChains() []apigen.UnavailableChain {
	var out []apigen.UnavailableChain
	for _, ch := range s.chains() {
		if ch.State != evmnodes.ChainUnavailable {
			continue
		}
		u := apigen.UnavailableChain{Name: ch.Name, ChainID: ch.ChainID, Nodes: make([]apigen.UnavailableNode, 0, len(ch.Nodes))}
		for _, n := range ch.Nodes {
			node := apigen.UnavailableNode{Name: n.Name, State: apigen.NodeState(n.State), LastErrorAt: n.LastErrorAt, RetryAt: n.RetryAt}
			if n.LastError != "" {
				node.LastError = &n.LastError
			}
			u.Nodes = append(u.Nodes, node)
		}
		out = append(out, u)
	}
	return out
}
