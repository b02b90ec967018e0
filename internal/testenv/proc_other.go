//go:build !linux

package testenv

import "syscall"

// childProcAttr: outside Linux there is no parent-death signal; servers are
// killed by t.Cleanup only.
func childProcAttr() *syscall.SysProcAttr { return nil }
