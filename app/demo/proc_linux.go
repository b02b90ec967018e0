package demo

import "syscall"

// childProcAttr makes the kernel kill redis-server when flatline dev dies
// without calling stop (SIGKILL, a panic), so no server outlives the demo,
// and puts it in its own process group so a Ctrl-C or SIGTERM to the
// terminal's group reaches only flatline, which then shuts down in order and
// stops redis-server last.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
