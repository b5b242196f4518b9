package pgcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// parentDeathSignal is what the kernel sends the postmaster when ledgerq dies.
// SIGINT is the postmaster's fast shutdown: sessions are ended, a checkpoint is
// written and the data directory is left clean. Tests set it to 0 to leave a
// server behind on purpose.
var parentDeathSignal = syscall.SIGINT

// serverSysProcAttr is how the postmaster is started. Go applies Pdeathsig
// after switching credentials, which matters: the kernel clears the parent
// death signal when a process changes its user, so setting it first would be
// lost under Credential. Setpgid keeps a terminal's Ctrl-C (sent to the
// foreground process group) away from the server; ledgerq stops it itself.
func serverSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: cred,
		Pdeathsig:  parentDeathSignal,
	}
}

// initdbSysProcAttr is how initdb is run: killed outright if ledgerq dies, the
// half-written directory is discarded at the next start.
func initdbSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: cred,
		Pdeathsig:  syscall.SIGKILL,
	}
}

// procInfo is what Start learns about the process named in a leftover
// postmaster.pid.
type procInfo struct {
	alive     bool // exists and is not a zombie
	inspected bool // its working directory could be read
	usesDir   bool // its working directory is the data directory: a server of this cluster
	// orphaned: it was started by a ledgerq process that has since died, so no
	// one else will stop it.
	orphaned bool
}

func inspectProcess(pid int, pgdata string) (procInfo, error) {
	state, ppid, err := procStat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return procInfo{}, nil
	}
	if err != nil {
		return procInfo{}, err
	}
	if state == 'Z' || state == 'X' {
		return procInfo{}, nil
	}
	info := procInfo{alive: true}

	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return procInfo{}, nil // exited meanwhile
	case err != nil:
		return info, nil // another user's process: cannot tell what it is
	}
	info.inspected = true
	info.usesDir = sameDir(cwd, pgdata)
	if !info.usesDir {
		return info, nil
	}

	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return info, nil
	}
	prefix := []byte(ownerEnv + "=")
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if owner, ok := bytes.CutPrefix(kv, prefix); ok {
			ownerPID, err := strconv.Atoi(string(owner))
			info.orphaned = err == nil && ownerPID != ppid
		}
	}
	return info, nil
}

// processesInDir lists live processes whose working directory is dir: a
// postmaster and its backends all chdir into the data directory.
func processesInDir(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !sameDir(cwd, dir) {
			continue
		}
		if state, _, err := procStat(pid); err == nil && state != 'Z' && state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// procStat reads a process's state letter and parent pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, ppid int, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	// The command name is in parentheses and may itself contain ") ".
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("parsing /proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(raw[end+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("parsing /proc/%d/stat: too few fields", pid)
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, 0, fmt.Errorf("parsing /proc/%d/stat: parent pid: %w", pid, err)
	}
	return fields[0][0], ppid, nil
}

func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}
