package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// cut makes the pending pool transactions into bundles of size, as the
// bundler does.
func (f *poolFixture) cut(size int) []store.Bundle {
	f.t.Helper()
	recent := []ledger.BlockRef{{Number: 10, Hash: ledger.Hash{10}}, {Number: 11, Hash: ledger.Hash{11}}}
	return testfactory.New(f.t, f.db.Store, f.clock).CutBundles(store.BundleCutParams{
		ChainID: poolChainID, Size: size, MaxQueued: 10, MaxBundles: 10, Recent: recent, Cores: 2,
	})
}

func TestBundles_GetShowsTheBundleItsTransactionsInOrderAndTheListPagesByNumber(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	key := newKey(t)
	var hashes []string
	for n := range uint64(3) {
		tx := dynTx(t, key, n, 2, 1)
		resp, _ := f.postTx(tx)
		require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
		hashes = append(hashes, strings.ToLower(tx.Hash().Hex()))
	}
	require.Len(t, f.cut(2), 2, "3 transactions in bundles of 2")

	resp := f.get("/v1/bundles/1")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var b struct {
		Number   int64    `json:"number"`
		State    string   `json:"state"`
		Version  int      `json:"version"`
		TxCount  int      `json:"tx_count"`
		Txs      []string `json:"txs"`
		Parent   string   `json:"parent"`
		Hash     string   `json:"hash"`
		Versions []any    `json:"versions"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &b))
	require.Equal(t, int64(1), b.Number)
	require.Equal(t, "queued", b.State)
	require.Equal(t, 1, b.Version)
	require.Equal(t, hashes[:2], b.Txs, "the transactions in execution (nonce) order")
	require.Empty(t, b.Versions, "nothing submitted yet")
	resp = f.get("/v1/bundles/2")
	require.Contains(t, resp.Body, `"parent":"`+b.Hash+`"`, "bundle 2 is built on bundle 1")

	// The transaction's own status names its bundle and the bundle's state.
	resp = f.get("/v1/pool/txs/" + hashes[0])
	require.Contains(t, resp.Body, `"state":"included"`)
	require.Contains(t, resp.Body, `"bundle_block":1`)
	require.Contains(t, resp.Body, `"bundle_state":"queued"`)

	resp = f.get("/v1/bundles?state=queued&limit=1")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var page struct {
		Bundles []struct {
			Number int64    `json:"number"`
			Txs    []string `json:"txs"`
		} `json:"bundles"`
		NextAfter *int64 `json:"next_after"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
	require.Len(t, page.Bundles, 1)
	require.Equal(t, int64(1), page.Bundles[0].Number)
	require.Nil(t, page.Bundles[0].Txs, "a list carries no transactions")
	require.NotNil(t, page.NextAfter)
	resp = f.get("/v1/bundles?state=queued&after=1")
	page.NextAfter = nil
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
	require.Len(t, page.Bundles, 1)
	require.Equal(t, int64(2), page.Bundles[0].Number)
	require.Nil(t, page.NextAfter)
	resp = f.get("/v1/bundles?state=finalized")
	require.JSONEq(t, `{"bundles":[]}`, resp.Body)
}

func TestBundles_BadParametersAre400AndAMissingBundle404(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	f.requireGets400(map[string]string{
		"/v1/bundles/abc":                  "path parameter block",
		"/v1/bundles/0":                    "path parameter block",
		"/v1/bundles/-1":                   "path parameter block",
		"/v1/bundles/99999999999999999999": "path parameter block",
		"/v1/bundles?state=lost":           "query parameter state",
		"/v1/bundles?after=x":              "query parameter after",
		"/v1/bundles?limit=0":              "limit",
	})
	resp := f.get("/v1/bundles/7")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
}

func TestBundles_RoutesAre404WhenTheBuilderLaneIsOff(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{"/v1/bundles/1", "/v1/bundles"} {
		resp := f.get(path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
		require.Contains(t, resp.Body, "builder lane is off")
	}
}
