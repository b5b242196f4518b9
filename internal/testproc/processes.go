package testproc

import (
	"os"
	"strconv"
	"testing"
)

// Processes lists the pids in /proc that match says yes to.
func Processes(t testing.TB, match func(pid int) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && match(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
