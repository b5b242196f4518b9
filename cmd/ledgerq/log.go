package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// newLogger logs with tint when w is a terminal and as JSON otherwise.
func newLogger(w *os.File, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if isatty.IsTerminal(w.Fd()) {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly})), nil
	}
	return slog.New(slog.NewJSONHandler(io.Writer(w), &slog.HandlerOptions{Level: lv})), nil
}
