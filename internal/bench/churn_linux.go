package bench

import "syscall"

// childProcAttr makes the kernel kill a churn run's processes if the run
// itself dies, so that no serve or simulated ledger outlives it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
