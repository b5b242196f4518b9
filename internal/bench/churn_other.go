//go:build !linux

package bench

import "syscall"

// childProcAttr: elsewhere than Linux the run's processes are stopped by
// the run's own cleanup only.
func childProcAttr() *syscall.SysProcAttr { return nil }
