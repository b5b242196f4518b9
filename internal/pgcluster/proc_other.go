//go:build unix && !linux

package pgcluster

import (
	"errors"
	"syscall"
)

// serverSysProcAttr is how the postmaster is started. Outside Linux there is no
// parent death signal, so a server whose ledgerq was killed keeps running until
// the next Start on its directory reports it. Setpgid keeps a terminal's Ctrl-C
// away from the server; ledgerq stops it itself.
func serverSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// initdbSysProcAttr is how initdb is run.
func initdbSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// procInfo is what Start learns about the process named in a leftover
// postmaster.pid. Without /proc only liveness is known.
type procInfo struct {
	alive     bool
	inspected bool
	usesDir   bool
	orphaned  bool
}

func inspectProcess(pid int, _ string) (procInfo, error) {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return procInfo{}, nil
	}
	return procInfo{alive: true}, nil
}

func processesInDir(string) ([]int, error) { return nil, nil }
