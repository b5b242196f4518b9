package main

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's current target (SetGCPercent returns the
// previous one) and leaves it as it was.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestGC_UnsetGOGCRunsWithLedgerqsTargetAndASetOneIsKept(t *testing.T) {
	before := gcPercent()
	t.Cleanup(func() { debug.SetGCPercent(before) })

	debug.SetGCPercent(100)
	if got := setDefaultGCPercent(func(string) (string, bool) { return "", false }); got != defaultGCPercent {
		t.Fatalf("GOGC unset: set %d, want %d", got, defaultGCPercent)
	}
	if got := gcPercent(); got != defaultGCPercent {
		t.Fatalf("GOGC unset: the collector's target is %d, want %d", got, defaultGCPercent)
	}

	debug.SetGCPercent(50) // as the runtime does for GOGC=50
	if got := setDefaultGCPercent(func(k string) (string, bool) { return "50", k == "GOGC" }); got != -1 {
		t.Fatalf("GOGC=50: set %d, want it left alone (-1)", got)
	}
	if got := gcPercent(); got != 50 {
		t.Fatalf("GOGC=50: the collector's target is %d, want 50", got)
	}
}
