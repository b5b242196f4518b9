package console

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// chains shows each chain the wallet lane sends on and its nodes, as the
// node layer sees them now (Config.Chains): read from memory, not the
// database.
func (c *Console) chains(ec echo.Context) error {
	var data []evmnodes.ChainStatus
	if c.cfg.Chains != nil {
		data = c.cfg.Chains()
	}
	return c.render(ec, http.StatusOK, "chains.html", page{Title: "Chains", Nav: "chains", Data: data})
}

// stateClass is the pill class of a chain's or a node's state: ok when it
// serves, warn when it is out for a while or not known yet, bad when no
// call goes to it (or, for a chain, none it reads from serves).
func stateClass(state string) string {
	// ChainHealthy and NodeHealthy are the same word.
	switch state {
	case evmnodes.NodeHealthy:
		return "ok"
	case evmnodes.ChainDegraded, evmnodes.NodeLagging, evmnodes.NodeBackoff, evmnodes.NodeUnknown:
		return "warn"
	}
	return "bad"
}

// percent writes a share from 0 to 1 as a percentage.
func percent(share float64) string {
	return fmt.Sprintf("%.1f %%", share*100)
}

// millis writes a latency in milliseconds.
func millis(ms float64) string {
	if ms < 10 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
