package testenv

import "syscall"

// ChildProcAttr makes the kernel kill a child process (a redis-server, a
// flatline binary under test) when the test binary dies (a timeout panic,
// ^C), so no process outlives its test.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// serverProcAttr is ChildProcAttr for a redis-server, in a process group of
// its own besides: a ^C at the terminal reaches only its owner, which stops
// it last (a benchmark's Redis outlives the flatline it measures).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
