//go:build !linux

package testanvil

import (
	"os"
	"syscall"
)

// sysProcAttr: process groups and a parent-death signal are set up on Linux
// only, where the tests run; elsewhere anvil is killed alone.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) error { return p.Kill() }
