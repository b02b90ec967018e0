//go:build !linux

package testenv

import "syscall"

// ChildProcAttr: outside Linux there is no parent-death signal; children
// are killed by t.Cleanup only.
func ChildProcAttr() *syscall.SysProcAttr { return nil }

// serverProcAttr: see ChildProcAttr.
func serverProcAttr() *syscall.SysProcAttr { return nil }
