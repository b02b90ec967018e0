//go:build !linux

package faults_test

import "syscall"

// childAttr: outside Linux there is no parent-death signal; children are
// killed by t.Cleanup only.
func childAttr() *syscall.SysProcAttr { return nil }
