package faults_test

import "syscall"

// childAttr makes the kernel kill a child flatline when the test binary
// dies (a timeout panic, ^C), so no process outlives its test.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
