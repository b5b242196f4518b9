// Package testlog keeps what the code under test logs, for the test to read.
//
// Only tests import this package.
package testlog

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// Recorder is a slog.Handler that keeps every record, at every level. The
// code under test may log while the test reads.
type Recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *Recorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *Recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *Recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *Recorder) WithGroup(string) slog.Handler      { return h }

// Records returns the records kept so far, oldest first.
func (h *Recorder) Records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}
