package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// scrape reads /metrics and returns the value of every sample by its name
// and labels, written as name{k="v",…} with labels sorted.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestMetrics_BatchLaneFiguresMoveAsBatchesGoThrough(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Loops.PollInterval = 20 * time.Millisecond
	cfg.Batch.FirstCheck, cfg.Batch.CheckInterval = time.Millisecond, 10*time.Millisecond
	cfg.Batch.Ledger.Sim.CommitDelay = 0
	cfg.API.Access.Open = true // the figures, not the access model (tested in httpapi)
	n, srv := openServed(t, ctx, cfg)

	// Before any loop runs: the oldest batch of each of the 3 services was
	// queued as it was stored, the others wait as "new".
	signer, err := sawtooth.GenerateSigner()
	require.NoError(t, err)
	const batches = 6
	var body []map[string]string
	for i := range batches {
		id, payload, err := signer.NewBatch([]byte("payload"))
		require.NoError(t, err)
		body = append(body, map[string]string{
			"id": id, "service_id": fmt.Sprintf("svc-%d", i%3), "payload": base64.StdEncoding.EncodeToString(payload),
		})
	}
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(srv.URL+"/v1/batches", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(msg))

	before := scrape(t, srv.URL)
	require.Equal(t, 3.0, before[`ledgerq_queue_depth{lane="batch",state="queued"}`])
	require.Equal(t, float64(batches-3), before[`ledgerq_queue_depth{lane="batch",state="new"}`])
	require.Equal(t, 3.0, before[`ledgerq_transitions_total{lane="batch",outcome="queued"}`])
	require.Zero(t, before[`ledgerq_queue_depth{lane="batch",state="pending"}`])
	require.GreaterOrEqual(t, before[`ledgerq_queue_oldest_age_seconds{lane="batch",state="new"}`], 0.0)
	require.Equal(t, float64(batches), before[`ledgerq_transitions_total{lane="batch",outcome="received"}`])
	require.Equal(t, 1.0, before[`ledgerq_http_requests_total{code="201",method="POST",route="/v1/batches"}`])
	require.Zero(t, before[`ledgerq_transitions_total{lane="batch",outcome="committed"}`])

	// The loops send every batch through; the figures follow.
	require.NoError(t, n.Start(ctx))
	defer n.Stop()
	var after map[string]float64
	// Every batch committed, and each loop has counted a round: the queuer's
	// first round may come after the batches committed, as the transactions
	// that store and finish batches queue the next ones themselves.
	rounds := func(m map[string]float64) bool {
		for _, l := range []string{"batch_queuer", "batch_submitter", "batch_monitor"} {
			if m[`ledgerq_loop_rounds_total{loop="`+l+`"}`] == 0 {
				return false
			}
		}
		return true
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = scrape(t, srv.URL)
		assert.True(c, after[`ledgerq_transitions_total{lane="batch",outcome="committed"}`] == batches && rounds(after), "last scrape: %v", after)
	}, time.Minute, 20*time.Millisecond, "batches did not commit")
	for _, state := range []string{"new", "queued", "held", "pending", "unknown", "delayed"} {
		require.Zero(t, after[`ledgerq_queue_depth{lane="batch",state="`+state+`"}`], state)
	}
	require.Equal(t, float64(batches), after[`ledgerq_transitions_total{lane="batch",outcome="submit_accepted"}`])
	require.GreaterOrEqual(t, after[`ledgerq_transitions_total{lane="batch",outcome="queued"}`], float64(batches))
	require.Positive(t, after[`ledgerq_ledger_call_seconds{lane="batch",op="submit"}_count`])
	require.Positive(t, after[`ledgerq_ledger_call_seconds{lane="batch",op="status"}_count`])
	for _, l := range []string{"batch_queuer", "batch_submitter", "batch_monitor"} {
		require.Positive(t, after[`ledgerq_loop_rounds_total{loop="`+l+`"}`], l)
	}
	require.Positive(t, after[`ledgerq_http_requests_total{code="200",method="GET",route="/metrics"}`])
}

func TestMetrics_LedgerErrorsAreCountedByClass(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Batch.Ledger.Sim.TransientRate = 1
	cfg.API.Access.Open = true // the figures, not the access model (tested in httpapi)
	n, srv := openServed(t, ctx, cfg)

	signer, err := sawtooth.GenerateSigner()
	require.NoError(t, err)
	id, payload, err := signer.NewBatch([]byte("p"))
	require.NoError(t, err)
	raw := fmt.Sprintf(`{"id":%q,"service_id":"s","payload":%q}`, id, base64.StdEncoding.EncodeToString(payload))
	resp, err := http.Post(srv.URL+"/v1/batches", "application/json", strings.NewReader(raw))
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, n.RunOnce(ctx))

	got := scrape(t, srv.URL)
	require.Equal(t, 1.0, got[`ledgerq_ledger_errors_total{class="transient",lane="batch",op="submit"}`])
	require.Equal(t, 1.0, got[`ledgerq_transitions_total{lane="batch",outcome="submit_delayed"}`])
	require.Equal(t, 1.0, got[`ledgerq_queue_depth{lane="batch",state="delayed"}`])
}
