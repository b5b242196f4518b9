package testanvil

import (
	"os"
	"syscall"
)

// sysProcAttr puts anvil in a process group of its own, so Stop can kill
// the group, and has the kernel kill it if the test binary dies first (a
// test timeout's panic, a SIGKILL) and no cleanup runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to p's process group.
func killGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}
