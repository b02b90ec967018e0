package testenv

import "syscall"

// childProcAttr makes the kernel kill a child server when the test binary
// dies (a timeout panic, ^C), so no redis-server outlives its test.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
