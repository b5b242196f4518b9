package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// chartWindow is the overview's charts' window.
const chartWindow = time.Hour

// lane is one panel of the overview: its states, each with a count the
// page's script refreshes from overview.json.
type lane struct {
	ID, Title, Help string
	Groups          []stateGroup
	// Oldest is when the lane's oldest waiting item arrived (zero: none
	// waits).
	Oldest time.Time
	// OldestWhat says which item that is.
	OldestWhat string
}

type stateGroup struct {
	Title  string
	States []stateCount
}

type stateCount struct {
	// Key names the count in overview.json (lane.state).
	Key, State, Help string
	Items            int64
}

// counts is overview.json: the live counts and each lane's oldest waiting
// item.
type counts struct {
	At     time.Time            `json:"at"`
	Counts map[string]int64     `json:"counts"`
	Oldest map[string]time.Time `json:"oldest"`
}

// laneStates are the states each panel shows, in lane order (a state with
// nothing in it shows 0).
var laneStates = []struct {
	lane, group string
	states      []string
}{
	{"batch", "Waiting", store.BatchWaitingStates},
	{"batch", "Ended in the last hour", []string{"committed", "invalid"}},
	{"pool", "Pool", []string{"pending", "queued"}},
	{"bundle", "Bundles in flight", []string{"queued", "submitted", "guaranteed", "accumulated"}},
	{"bundle", "Ended in the last hour", []string{"finalized", "dropped"}},
	{"task", "Tasks", []string{"Waiting", "Executing"}},
	{"task", "Ended in the last hour", []string{"Done", "Error"}},
	{"attempt", "Transactions", []string{"mined"}},
}

var stateHelp = map[string]string{
	"batch.new":          "stored, not yet admitted (its service has a batch at the ledger)",
	"batch.queued":       "admitted, waiting for a submitter",
	"batch.held":         "a submitter is sending it",
	"batch.pending":      "the ledger has it; waiting for its final status",
	"batch.unknown":      "the ledger did not know it; it is sent again",
	"batch.delayed":      "a transient failure; sent again after the delay window",
	"pool.pending":       "next in line for its sender's nonce",
	"pool.queued":        "waiting for a nonce gap to close",
	"bundle.queued":      "cut, waiting for a core",
	"bundle.submitted":   "with the guarantors",
	"bundle.guaranteed":  "guaranteed, waiting for accumulation",
	"bundle.accumulated": "executed, waiting for finality",
	"task.Waiting":       "not yet signed (the wallet sends in order)",
	"task.Executing":     "its transaction is out; waiting for it to be final",
	"attempt.mined":      "transactions mined in the last hour (a task's bumps count apart)",
}

// liveCounts reads the counts of every lane.
func (c *Console) liveCounts(ec echo.Context) (counts, store.LaneHistory, error) {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	now := c.clock.Now().UTC()
	out := counts{At: now, Counts: map[string]int64{}, Oldest: map[string]time.Time{}}
	for _, l := range laneStates {
		for _, st := range l.states {
			out.Counts[l.lane+"."+st] = 0
		}
	}
	live, err := c.store.LaneCountsGet(ctx)
	if err != nil {
		return out, store.LaneHistory{}, err
	}
	// Whole minutes, so that the database's minutes are the charts'.
	hist, err := c.store.LaneHistoryGet(ctx, now.Truncate(time.Minute).Add(-chartWindow+time.Minute))
	if err != nil {
		return out, hist, err
	}
	add := func(lane string, states []store.LaneState) {
		for _, s := range states {
			out.Counts[lane+"."+s.State] += s.Items
			if o, ok := out.Oldest[lane]; !s.Oldest.IsZero() && (!ok || s.Oldest.Before(o)) {
				out.Oldest[lane] = s.Oldest
			}
		}
	}
	add("batch", live.Batches)
	add("pool", live.Pool)
	add("bundle", live.Bundles)
	add("task", live.Tasks)
	for lane, rows := range map[string][]store.MinuteCount{"batch": hist.Batches, "bundle": hist.Bundles, "task": hist.Tasks, "attempt": hist.Mined} {
		for _, r := range rows {
			out.Counts[lane+"."+r.State] += r.Items
		}
	}
	// The builder lane's oldest is its pool's: a bundle waits for the chain,
	// a transaction for the bundler.
	if o, ok := out.Oldest["pool"]; ok {
		if b, ok := out.Oldest["bundle"]; !ok || o.Before(b) {
			out.Oldest["bundle"] = o
		}
	}
	return out, hist, nil
}

func (c *Console) overviewJSON(ec echo.Context) error {
	cnt, _, err := c.liveCounts(ec)
	if err != nil {
		return c.storeFail(ec, "the counts", err)
	}
	return ec.JSON(http.StatusOK, cnt)
}

type overviewData struct {
	Lanes  []lane
	Charts []chart
	Health healthView
}

type healthView struct {
	DBOK      bool
	DBError   string
	DBLatency time.Duration
	Ledgers   []ledgerSign
	// Paused are the stopped wallets, named when this server sends for
	// them.
	Paused []pausedWallet
	store.Health
}

type pausedWallet struct {
	// Name is "" for a wallet this server does not send for.
	Name string
	store.WalletHealth
}

type ledgerSign struct {
	Lane, What string
	At         *time.Time
}

func (c *Console) overview(ec echo.Context) error {
	cnt, hist, err := c.liveCounts(ec)
	if err != nil {
		return c.storeFail(ec, "the overview", err)
	}
	data := overviewData{Charts: charts(hist, cnt.At)}
	for _, panel := range []struct{ id, title, help, oldestKey, oldestWhat string }{
		{"batch", "Batch lane", "Signed batches sent to the batch ledger, one at a time per service.", "batch", "batch"},
		{"builder", "Builder lane", "Transactions from the pool, cut into bundles for the JAM chain.", "bundle", "pool transaction"},
		{"wallet", "Wallet lane", "send-tx tasks, signed and sent by ledgerq's wallets.", "task", "task"},
	} {
		l := lane{ID: panel.id, Title: panel.title, Help: panel.help, Oldest: cnt.Oldest[panel.oldestKey], OldestWhat: panel.oldestWhat}
		for _, ls := range laneStates {
			if laneOf(ls.lane) != panel.id {
				continue
			}
			g := stateGroup{Title: ls.group}
			for _, st := range ls.states {
				key := ls.lane + "." + st
				g.States = append(g.States, stateCount{Key: key, State: st, Help: stateHelp[key], Items: cnt.Counts[key]})
			}
			l.Groups = append(l.Groups, g)
		}
		data.Lanes = append(data.Lanes, l)
	}
	data.Health = c.health(ec)
	return c.render(ec, http.StatusOK, "overview.html", page{Title: "Overview", Nav: "overview", Data: data})
}

func laneOf(key string) string {
	switch key {
	case "batch":
		return "batch"
	case "pool", "bundle":
		return "builder"
	}
	return "wallet"
}

// health reads the health panel; a database that does not answer is what
// it shows, not an error page.
func (c *Console) health(ec echo.Context) healthView {
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	var h healthView
	began := time.Now()
	if err := c.store.Ping(ctx); err != nil {
		h.DBError = err.Error()
		return h
	}
	h.DBOK, h.DBLatency = true, time.Since(began).Round(10*time.Microsecond)
	got, err := c.store.HealthGet(ctx, c.clock.Now())
	if err != nil {
		h.DBOK, h.DBError = false, fmt.Sprintf("reading the health: %v", err)
		return h
	}
	h.Health = got
	for _, w := range got.Stopped {
		p := pausedWallet{WalletHealth: w}
		if c.wallets != nil {
			if rw, ok := c.wallets.BySender(w.ChainID, ledger.Address(common.HexToAddress(w.Sender))); ok {
				p.Name = rw.ID
			}
		}
		h.Paused = append(h.Paused, p)
	}
	h.Ledgers = []ledgerSign{
		{"Batch lane", "last final status from the batch ledger", got.LastBatchFinal},
		{"Wallet lane", "last read of a wallet's chain (nonce, head)", got.LastWalletRead},
		{"Builder lane", "last JAM block applied to the bundles", got.LastBlockApplied},
	}
	return h
}

// charts are the overview's charts over the window ending at now.
func charts(h store.LaneHistory, now time.Time) []chart {
	end := now.Truncate(time.Minute)
	start := end.Add(-chartWindow + time.Minute)
	n := int(chartWindow / time.Minute)
	minutes := make([]time.Time, n)
	for i := range minutes {
		minutes[i] = start.Add(time.Duration(i) * time.Minute)
	}
	idx := func(m time.Time) int {
		i := int(m.Sub(start) / time.Minute)
		if i < 0 || i >= n {
			return -1
		}
		return i
	}
	perSecond := func(rows []store.MinuteCount, state string) []float64 {
		out := make([]float64, n)
		for _, r := range rows {
			if i := idx(r.Minute); i >= 0 && r.State == state {
				out[i] += float64(r.Items) / 60
			}
		}
		return out
	}
	latency := func(id, title string, rows []store.MinuteCount, state string) chart {
		p50, p99, has := make([]float64, n), make([]float64, n), make([]bool, n)
		for _, r := range rows {
			if i := idx(r.Minute); i >= 0 && r.State == state {
				p50[i], p99[i], has[i] = r.P50, r.P99, true
			}
		}
		return chart{ID: id, Title: title, Unit: "seconds", Minutes: minutes, Series: []series{
			{Name: "p50", Class: "s0", Values: p50, Has: has},
			{Name: "p99", Class: "s1", Values: p99, Has: has},
		}}
	}
	return []chart{
		{ID: "chart-throughput", Title: "Throughput", Unit: "per second", Minutes: minutes, Series: []series{
			{Name: "batches committed/s", Class: "s0", Values: perSecond(h.Batches, "committed")},
			{Name: "transactions mined/s", Class: "s1", Values: perSecond(h.Mined, "mined")},
			{Name: "bundles finalized/s", Class: "s2", Values: perSecond(h.Bundles, "finalized")},
		}},
		latency("chart-latency-batch", "Batch: received → final", h.Batches, "committed"),
		latency("chart-latency-task", "Task: received → done", h.Tasks, "Done"),
		latency("chart-latency-bundle", "Pool transaction: received → bundle final", h.Bundles, "finalized"),
	}
}
