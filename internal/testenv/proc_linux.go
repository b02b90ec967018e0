package testenv

import "syscall"

// ChildProcAttr makes the kernel kill a child process (a redis-server, a
// flatline binary under test) when the test binary dies (a timeout panic,
// ^C), so no process outlives its test.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
