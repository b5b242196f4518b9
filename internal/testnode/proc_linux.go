package testnode

import (
	"os"
	"syscall"
)

// SysProcAttr puts a node in a process group of its own, so a test can kill the
// group, and has the kernel kill it if the test binary dies first (a test
// timeout's panic, a SIGKILL) and no cleanup runs.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// KillGroup sends SIGKILL to p's process group.
func KillGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}
