package jam_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
)

// serve serves b's chain and returns a client of it.
func serve(t *testing.T, b *bundle) *jam.Client {
	t.Helper()
	srv := httptest.NewServer(jam.NewHandler(b.chain))
	t.Cleanup(srv.Close)
	return jam.NewClient(srv.URL, srv.Client())
}

func TestClient_G15ReasonSurvivesTheTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	c := serve(t, b)
	wp := pkg(t, c, 1, ledger.Hash{}, 1, b.tx(t))
	b.advance(ledger.RecentHistorySize)
	err := c.SubmitWorkPackage(ctx, wp)
	wantClass(t, err, ledger.Deterministic)
	if !strings.HasPrefix(ledger.ReasonOf(err), ledger.AnchorNotRecent) {
		t.Fatalf("reason %q, want prefix %q", ledger.ReasonOf(err), ledger.AnchorNotRecent)
	}
}

func TestClient_BuilderLaneRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{Cores: 3})
	c := serve(t, b)
	b.advance(10)
	checkPagination(t, c)

	recent, err := c.RecentBlocks(ctx)
	want, _ := b.chain.RecentBlocks(ctx)
	if err != nil || !reflect.DeepEqual(recent, want) {
		t.Fatalf("RecentBlocks over HTTP = %v, %v; want %v", recent, err, want)
	}
	wp := pkg(t, c, 1, ledger.Hash{}, 1, b.tx(t))
	wp.Core = 2
	evmHash, h := hashes(t, wp)
	submit(t, c, wp)
	b.advance(2)
	if g := blockAt(t, c, 11).Guarantees; len(g) != 1 || g[0] != h {
		t.Fatalf("slot 11 guarantees over HTTP = %v, want [%s]", g, h.Hex())
	}
	if a := blockAt(t, c, 12).Accumulations; len(a) != 1 || a[0] != h {
		t.Fatalf("slot 12 accumulations over HTTP = %v, want [%s]", a, h.Hex())
	}
	info, err := c.Info(ctx)
	if err != nil || !info.Genesis.Equal(t0) || info.SlotLength != slot || info.Cores != 3 ||
		info.Executed != (ledger.BlockRef{Number: 1, Hash: evmHash}) {
		t.Fatalf("Info over HTTP = %+v, %v", info, err)
	}
	log, err := c.Log(ctx)
	if err != nil || len(log.Executions) != 1 || log.Executions[0].PackageHash != h.Hex() || len(log.Refusals) != 0 {
		t.Fatalf("Log over HTTP = %+v, %v", log, err)
	}
	if s, err := c.Stats(ctx); err != nil || s.Executed != 1 || s.Head != 12 {
		t.Fatalf("Stats over HTTP = %+v, %v", s, err)
	}
}

func TestClient_FaultsAreClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cfg       jam.Config
		class     ledger.Class // 0: success
		taken     bool
		guarantee uint64 // slot it is guaranteed in; 0: never
	}{
		{"transient", jam.Config{TransientError: 1}, ledger.Transient, false, 0},
		{"lost response", jam.Config{LostResponse: 1}, ledger.Indeterminate, true, 3},
		{"no guarantee", jam.Config{NoGuarantee: 1}, 0, true, 0},
		{"late guarantee", jam.Config{LateGuarantee: 1}, 0, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.cfg)
			c := serve(t, b)
			b.advance(2)
			wp := pkg(t, c, 1, ledger.Hash{}, 1, b.tx(t))
			_, h := hashes(t, wp)
			err := c.SubmitWorkPackage(ctx, wp)
			if tc.class == 0 {
				if err != nil {
					t.Fatalf("SubmitWorkPackage = %v, want success", err)
				}
			} else {
				wantClass(t, err, tc.class)
			}
			b.advance(8)
			var got uint64
			bs, err := c.Blocks(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, blk := range bs {
				for _, g := range blk.Guarantees {
					if g == h {
						got = blk.Slot
					}
				}
			}
			if got != tc.guarantee {
				t.Errorf("guaranteed in slot %d, want %d (0: never)", got, tc.guarantee)
			}
			if s := b.chain.Stats(); (s.Taken == 1) != tc.taken {
				t.Errorf("taken = %d, want taken %v", s.Taken, tc.taken)
			}
		})
	}
}

func TestClient_SubmitAnswersAreClassified(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	for _, tc := range []struct {
		status int
		body   string
		class  ledger.Class
	}{
		{http.StatusUnprocessableEntity, `{"reason":"bad core","message":"core 9"}`, ledger.Deterministic},
		{http.StatusBadRequest, `{"reason":"malformed work package","message":"x"}`, ledger.Deterministic},
		{http.StatusServiceUnavailable, `{"reason":"busy","message":"x"}`, ledger.Transient},
		{http.StatusInternalServerError, `oops`, ledger.Indeterminate},
		{http.StatusGatewayTimeout, ``, ledger.Indeterminate},
		{http.StatusTooManyRequests, ``, ledger.Transient},
		{http.StatusNotFound, `404 page not found`, ledger.Transient},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		err := jam.NewClient(srv.URL, srv.Client()).SubmitWorkPackage(ctx, wp)
		srv.Close()
		if got := ledger.ClassOf(err); err == nil || got != tc.class {
			t.Errorf("answer %d: %v (class %s), want %s", tc.status, err, got, tc.class)
		}
	}
}

func TestClient_TimeoutAfterTheRequestWasSentIsIndeterminate(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	cctx, cancel := context.WithCancel(ctx)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The chain has the request: the caller gives up before the answer.
		cancel()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	err := jam.NewClient(srv.URL, srv.Client()).SubmitWorkPackage(cctx, wp)
	wantClass(t, err, ledger.Indeterminate)
}

func TestClient_UnreachableChainIsTransient(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	wp := pkg(t, b.chain, 1, ledger.Hash{}, 1, b.tx(t))
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := jam.NewClient(url, nil)
	wantClass(t, c.SubmitWorkPackage(ctx, wp), ledger.Transient)
	_, err := c.RecentBlocks(ctx)
	wantClass(t, err, ledger.Transient)
	_, err = c.Blocks(ctx, 0, 10)
	wantClass(t, err, ledger.Transient)
	_, err = c.Info(ctx)
	wantClass(t, err, ledger.Transient)
}

func TestClient_NonceAtIsTheSendersNonceAfterExecutedBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, jam.Config{})
	c := serve(t, b)
	from := ledger.Address(crypto.PubkeyToAddress(b.key.PublicKey))
	if n, err := c.NonceAt(ctx, from); err != nil || n != 0 {
		t.Fatalf("NonceAt before any block = %d, %v; want 0", n, err)
	}
	wp := pkg(t, c, 1, ledger.Hash{}, 1, b.tx(t), b.tx(t))
	submit(t, c, wp)
	if n, _ := c.NonceAt(ctx, from); n != 0 {
		t.Fatalf("NonceAt with the block only submitted = %d, want 0", n)
	}
	b.advance(2)
	if n, err := c.NonceAt(ctx, from); err != nil || n != 2 {
		t.Fatalf("NonceAt after the block executed = %d, %v; want 2", n, err)
	}
}

// A server from before blocks listed their skipped transactions sends no
// "skipped": the client reads it as none.
func TestClient_ABlockWithoutSkippedHasNone(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"slot":3,"hash":"0x` + strings.Repeat("ab", 32) + `","guarantees":[],"accumulations":["0x` + strings.Repeat("cd", 32) + `"]}]`))
	}))
	t.Cleanup(srv.Close)
	blocks, err := jam.NewClient(srv.URL, srv.Client()).Blocks(ctx, 2, 10)
	if err != nil || len(blocks) != 1 || len(blocks[0].Accumulations) != 1 || blocks[0].Skipped != nil {
		t.Fatalf("Blocks = %+v, %v; want one block with one accumulation and nothing skipped", blocks, err)
	}
}
