//go:build !linux

package demo

import "syscall"

// childProcAttr: outside Linux there is no parent-death signal; the server is
// stopped by stop only.
func childProcAttr() *syscall.SysProcAttr { return nil }
