package testproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// Stat is what /proc/PID/stat says of a process: its state letter (Z a
// zombie, X dead), its parent and its process group.
type Stat struct {
	State      byte
	PPID, PGID int
}

// ReadStat reads /proc/PID/stat, whose command name, in parentheses, may
// itself hold spaces and parentheses.
func ReadStat(pid int) (Stat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(raw[end+1:]))
	if len(fields) < 3 || len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: parent: %w", pid, err)
	}
	pgid, err := strconv.Atoi(fields[2])
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: process group: %w", pid, err)
	}
	return Stat{State: fields[0][0], PPID: ppid, PGID: pgid}, nil
}

// Alive reports whether pid is a process that has not exited (a zombie
// has).
func Alive(pid int) bool {
	st, err := ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}
