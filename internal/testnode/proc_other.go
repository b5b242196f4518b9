//go:build !linux

package testnode

import (
	"os"
	"syscall"
)

// SysProcAttr: process groups and a parent-death signal are set up on Linux
// only, where the tests run; elsewhere a node is killed alone.
func SysProcAttr() *syscall.SysProcAttr { return nil }

func KillGroup(p *os.Process) error { return p.Kill() }
