package devenv

import "syscall"

// childProcAttr makes the kernel kill redis-server when flatline dev dies
// without calling stop (SIGKILL, a panic), so no server outlives the demo.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
