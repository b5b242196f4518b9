package failover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// checkAnswers fails the test for every answer that must not be: the API
// answers 503 with Retry-After while it has no database, never another
// 5xx, and never leaves a client without an answer.
func (r *run) checkAnswers() {
	r.t.Helper()
	a := r.answers
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, lane := range lanes {
		r.logf("answers, %s lane: %s", lane, statusLine(a.counts[lane]))
	}
	r.load.mu.Lock()
	quick, waiting := r.load.stored503[false], r.load.stored503[true]
	r.load.mu.Unlock()
	r.logf("send-tx answered 503 after its task was stored (the retry replayed it): %d waiting for the task, %d fire-and-forget", waiting, quick)
	if waiting > 0 {
		r.t.Errorf("%d send-tx that waited for their task answered 503 although the task was stored: a client without an Idempotency-Key would send it again", waiting)
	}
	// While a fenced primary refused writes (25006) and had not yet died,
	// the writes the clients sent were answered 503, not 500, and not
	// taken: the read-only answer is an outage, not a refusal.
	for i, ft := range r.failovers {
		if !ft.fenced {
			continue
		}
		n := 0
		for _, lane := range lanes {
			for _, at := range a.unavailable[lane] {
				if !at.Before(ft.down) && at.Before(ft.killed) {
					n++
				}
			}
		}
		r.logf("failover %d: %d answers 503 while %s was read-only and alive", i+1, n, ft.node)
		if n == 0 {
			r.t.Errorf("failover %d: no 503 while %s refused writes: the read-only primary was not treated as unavailable", i+1, ft.node)
		}
	}
	for i, b := range a.bad {
		if i == 20 {
			r.t.Errorf("… and %d more", len(a.bad)-i)
			break
		}
		r.t.Errorf("an answer that must not be: %s", b)
	}
}

// simEvent is one entry of the simulated Sawtooth ledger's GET /debug/log.
type simEvent struct {
	Seq     uint64 `json:"seq"`
	Kind    string `json:"kind"`
	BatchID string `json:"batch_id"`
}

// checkBatches reads the Sawtooth ledger's log: every accepted batch
// committed exactly once, nothing else committed, and each service's
// batches taken by the ledger in the order they were posted. It returns
// how many batches were committed.
func (r *run) checkBatches() int {
	r.t.Helper()
	var events []simEvent
	for since := uint64(0); ; {
		var page []simEvent
		getJSON(r.t, r.sawtoothURL+"/debug/log?since="+strconv.FormatUint(since, 10), &page)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			require.Equal(r.t, since+1, e.Seq, "the Sawtooth ledger's log has a gap")
			since = e.Seq
		}
		events = append(events, page...)
	}
	batches, _, _ := r.load.accepted()
	service := map[string]string{}
	posted := map[string][]string{}
	for _, b := range batches {
		service[b.id] = b.service
		posted[b.service] = append(posted[b.service], b.id)
	}
	committed := map[string]int{}
	taken := map[string][]string{}
	duplicates := 0
	for _, e := range events {
		switch e.Kind {
		case "committed":
			committed[e.BatchID]++
		case "accepted":
			taken[service[e.BatchID]] = append(taken[service[e.BatchID]], e.BatchID)
		case "duplicate":
			duplicates++
		default:
			r.t.Errorf("the Sawtooth ledger's log: batch %s %s", e.BatchID, e.Kind)
		}
	}
	lost, twice := lostAndTwice(batches, func(b acceptedBatch) int { return committed[b.id] })
	for id := range committed {
		if _, ok := service[id]; !ok {
			r.t.Errorf("batch %s committed, but the API never accepted it", id)
		}
	}
	require.Zero(r.t, lost, "accepted batches never committed")
	require.Zero(r.t, twice, "batches committed twice")
	for s, ids := range posted {
		require.Equal(r.t, ids, taken[s], "service %s: the ledger took its batches out of their order", s)
	}
	r.logf("Sawtooth ledger: %d batches of %d services committed once each, in order; 0 lost, 0 twice; %d sent again while it held them (taken as duplicates)",
		len(batches), len(posted), duplicates)
	return len(batches)
}

// checkWallet reads every block of geth: the wallet's nonces contiguous
// from 0, each task done with the hash of the one mined transaction that
// carries its call data, every other mined transaction a no-op of
// ledgerq's. It returns the tasks and the no-ops mined.
func (r *run) checkWallet() (tasks, noops int) {
	r.t.Helper()
	ctx := context.Background()
	mined, err := testgeth.MinedFrom(ctx, r.geth.URL, r.wallet)
	require.NoError(r.t, err)
	require.NoError(r.t, testgeth.CheckNonces(mined), "the wallet's nonces")
	require.NotEmpty(r.t, mined)
	require.Zero(r.t, mined[0].Nonce)
	explained := map[common.Hash]bool{}
	_, accepted, _ := r.load.accepted()
	lost, twice := 0, 0
	for _, a := range accepted {
		task, err := r.db.TaskGet(ctx, walletName, a.id)
		require.NoError(r.t, err)
		var withData []testgeth.MinedTx
		for _, tx := range mined {
			if bytes.Equal(tx.Data, a.data) {
				withData = append(withData, tx)
			}
		}
		switch {
		case len(withData) == 0:
			lost++
		case len(withData) > 1:
			twice++
		}
		require.Equal(r.t, store.TaskDone, task.Status, "task %s is %s (%s)", a.id, task.Status, task.Error)
		require.Len(r.t, withData, 1, "task %s: its call data is mined exactly once", a.id)
		require.Equal(r.t, withData[0].Hash, common.HexToHash(task.TxHash), "task %s is done with the hash the chain has", a.id)
		explained[withData[0].Hash] = true
	}
	rows, err := r.db.Conns().Query(ctx, `SELECT tx_hash FROM ledgerq.tx_attempts WHERE sender = $1 AND task_id IS NULL`, strings.ToLower(r.wallet.Hex()))
	require.NoError(r.t, err)
	byHash, err := testgeth.ByHash(mined)
	require.NoError(r.t, err)
	for rows.Next() {
		var h string
		require.NoError(r.t, rows.Scan(&h))
		if _, ok := byHash[common.HexToHash(h)]; ok {
			explained[common.HexToHash(h)] = true
			noops++
		}
	}
	require.NoError(r.t, rows.Err())
	for _, tx := range mined {
		require.True(r.t, explained[tx.Hash], "mined transaction %s at nonce %d is no task's and no no-op's", tx.Hash.Hex(), tx.Nonce)
	}
	r.logf("geth: %d tasks each mined once in the transaction they record, %d no-ops, nonces 0..%d contiguous; %d lost, %d twice",
		len(accepted), noops, len(mined)-1, lost, twice)
	return len(accepted), noops
}

// jamExecution is one entry of the simulated JAM chain's GET /debug/log.
type jamExecution struct {
	Number   uint64   `json:"number"`
	TxHashes []string `json:"tx_hashes"`
	Skipped  []struct {
		Hash   string `json:"hash"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// checkBuilder reads the JAM chain's log: every accepted transaction
// executed exactly once, in nonce order per sender, nothing else, each
// block number once. It returns the transactions and blocks executed.
func (r *run) checkBuilder() (txs, blocks int) {
	r.t.Helper()
	var log struct {
		Executions []jamExecution `json:"executions"`
	}
	getJSON(r.t, r.jamURL+"/debug/log", &log)
	_, _, accepted := r.load.accepted()
	want := map[string]acceptedTx{}
	for _, tx := range accepted {
		want[tx.hash] = tx
	}
	count := map[string]int{}
	numbers := map[uint64]int{}
	next := map[common.Address]uint64{}
	for _, e := range log.Executions {
		numbers[e.Number]++
		require.Empty(r.t, e.Skipped, "block %d: the EVM refused transactions", e.Number)
		for _, h := range e.TxHashes {
			count[h]++
			tx, ok := want[h]
			require.True(r.t, ok, "block %d executed %s, which the API never accepted", e.Number, h)
			require.Equal(r.t, next[tx.sender], tx.nonce, "sender %s executed out of nonce order", tx.sender.Hex())
			next[tx.sender]++
		}
	}
	for n, c := range numbers {
		require.Equal(r.t, 1, c, "block number %d executed %d times", n, c)
	}
	lost, twice := lostAndTwice(accepted, func(tx acceptedTx) int { return count[tx.hash] })
	require.Zero(r.t, lost, "accepted transactions never executed")
	require.Zero(r.t, twice, "transactions executed twice")
	r.logf("JAM chain: %d transactions of %d senders each executed once, in nonce order, in %d blocks; 0 lost, 0 twice",
		len(accepted), builderSenders, len(log.Executions))
	return len(accepted), len(log.Executions)
}

// report prints the failovers, each lane's stop around them and the items.
func (r *run) report(batches, tasks, noops, txs, bundles int) {
	r.t.Helper()
	stops, resumed := r.stopTimes()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d failovers: the primary's pg_autoctl, postmaster and backends SIGKILLed (every other one read-only for %s first), the secondary promoted, the killed node back as secondary\n", len(r.failovers), fenceFor)
	fmt.Fprintf(&b, "  %-3s %-6s %-9s %7s %9s %9s | lane stopped (s): %7s %7s %7s | 503s in the failover\n", "#", "killed", "read-only", "at (s)", "writes(s)", "back (s)", laneBatch, laneWallet, laneBuilder)
	r.answers.mu.Lock()
	for i, ft := range r.failovers {
		var n503 []string
		for _, lane := range lanes {
			n := 0
			for _, at := range r.answers.unavailable[lane] {
				if !at.Before(ft.down) && at.Before(ft.rejoined) {
					n++
				}
			}
			n503 = append(n503, fmt.Sprintf("%s %d", lane, n))
		}
		fenced := "no"
		if ft.fenced {
			fenced = "yes"
		}
		fmt.Fprintf(&b, "  %-3d %-6s %-9s %7.1f %9.1f %9.1f | %17s %7.1f %7.1f %7.1f | %s\n", i+1, ft.node, fenced,
			ft.down.Sub(r.began).Seconds(), ft.promoted.Sub(ft.down).Seconds(), ft.rejoined.Sub(ft.down).Seconds(),
			"", stops[laneBatch][i].Seconds(), stops[laneWallet][i].Seconds(), stops[laneBuilder][i].Seconds(), strings.Join(n503, ", "))
	}
	r.answers.mu.Unlock()
	var promoted []time.Duration
	for _, ft := range r.failovers {
		promoted = append(promoted, ft.promoted.Sub(ft.down))
	}
	fmt.Fprintf(&b, "no writes (the primary read-only or dead) until the new primary took them: p50 %.1fs, max %.1fs\n",
		percentile(promoted, 0.5).Seconds(), percentile(promoted, 1).Seconds())
	fmt.Fprintf(&b, "each lane stopped (its last step before the primary stopped taking writes to its first after):\n")
	for _, lane := range lanes {
		what := map[string]string{laneBatch: "batch committed", laneWallet: "task done", laneBuilder: "bundle finalized"}[lane]
		fmt.Fprintf(&b, "  %-8s (%-16s) p50 %5.1fs  max %5.1fs;  its first step after the new primary took writes: p50 %4.1fs  max %4.1fs\n", lane, what,
			percentile(stops[lane], 0.5).Seconds(), percentile(stops[lane], 1).Seconds(),
			percentile(resumed[lane], 0.5).Seconds(), percentile(resumed[lane], 1).Seconds())
	}
	fmt.Fprintf(&b, "items: %d batches committed once, %d tasks mined once (+%d no-ops), %d pool transactions executed once in %d blocks; lost 0, twice 0\n",
		batches, tasks, noops, txs, bundles)
	fmt.Fprintf(&b, "run time %.0fs", time.Since(r.began).Seconds())
	r.t.Log(b.String())
}

func getJSON(t require.TestingT, url string, v any) {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	require.NoError(t, json.Unmarshal(body, v), "%s", url)
}

// lostAndTwice counts the items that times says were carried out never
// (lost) and more than once (twice).
func lostAndTwice[T any](items []T, times func(T) int) (lost, twice int) {
	for _, it := range items {
		switch times(it) {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	return lost, twice
}
