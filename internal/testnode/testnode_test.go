package testnode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/testnode"
)

func TestPoll_StopsWhenDoneTakesTheAnswerOrTheTimeRunsOut(t *testing.T) {
	calls := 0
	v, ok, err := testnode.Poll(func(context.Context) (int, error) { calls++; return calls, nil },
		func(v int, _ error) bool { return v == 3 }, time.Millisecond, time.Second, time.Minute)
	if !ok || v != 3 || err != nil || calls != 3 {
		t.Fatalf("Poll = %d, %v, %v after %d calls; want 3, true, nil after 3", v, ok, err, calls)
	}
	boom := errors.New("boom")
	_, ok, err = testnode.Poll(func(context.Context) (int, error) { return 0, boom },
		func(_ int, err error) bool { return err == nil }, time.Millisecond, time.Second, 20*time.Millisecond)
	if ok || !errors.Is(err, boom) {
		t.Fatalf("Poll past its time = %v, %v; want false and the last error", ok, err)
	}
}

func TestLogTail_IsTheLastLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "node.log")
	if err := os.WriteFile(p, []byte("a\nb\nc\nd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := testnode.LogTail(p, 2); got != "c\nd" {
		t.Fatalf("LogTail = %q, want %q", got, "c\nd")
	}
	if got := testnode.LogTail(filepath.Join(t.TempDir(), "none"), 2); got[:15] != "(log unreadable" {
		t.Fatalf("LogTail of no file = %q", got)
	}
}
