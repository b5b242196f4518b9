package submitter

import (
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

func TestWindow_OpensThreeSecondsAndClosesOneSecondBeforeEachSixSecondSlot(t *testing.T) {
	g := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	info := ledger.ChainInfo{Genesis: g, SlotLength: 6 * time.Second}
	at := func(d time.Duration) time.Time { return g.Add(d) }
	for _, c := range []struct {
		now  time.Duration
		in   bool
		next time.Duration
	}{
		{0, false, 3 * time.Second},                              // slot 0 just began: the window before slot 1 opens at 3 s
		{2999 * time.Millisecond, false, 3 * time.Second},        // not yet
		{3 * time.Second, true, 3 * time.Second},                 // opens
		{4999 * time.Millisecond, true, 4999 * time.Millisecond}, // still in
		{5 * time.Second, false, 9 * time.Second},                // closed 1 s before the slot; next opens at 12 - 3
		{6 * time.Second, false, 9 * time.Second},                // slot 1 began
		{10 * time.Second, true, 10 * time.Second},
	} {
		in, next := Window(info, at(c.now), 3*time.Second, time.Second)
		if in != c.in || !next.Equal(at(c.next)) {
			t.Errorf("at %s: in %v next %s, want in %v next %s", c.now, in, next.Sub(g), c.in, c.next)
		}
	}
}

func TestWindowBounds_ScaleTheBuildersWindowToTheSlot(t *testing.T) {
	s := &BundleSubmitter{}
	if o, c := s.windowBounds(6 * time.Second); o != 3*time.Second || c != time.Second {
		t.Errorf("6 s slot: window %s..%s before the slot, want 3s..1s", o, c)
	}
	if o, c := s.windowBounds(600 * time.Millisecond); o != 300*time.Millisecond || c != 100*time.Millisecond {
		t.Errorf("600 ms slot: window %s..%s, want 300ms..100ms", o, c)
	}
	s.cfg.WindowOpen, s.cfg.WindowClose = 2*time.Second, 500*time.Millisecond
	if o, c := s.windowBounds(6 * time.Second); o != 2*time.Second || c != 500*time.Millisecond {
		t.Errorf("configured window %s..%s, want 2s..500ms", o, c)
	}
}
