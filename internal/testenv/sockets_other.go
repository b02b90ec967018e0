//go:build !linux

package testenv

import "errors"

// ProcResources is what a process holds (Linux only).
type ProcResources struct {
	FDs   int
	TCPTo map[int]int
}

// ReadProcResources is not available off Linux.
func ReadProcResources(pid int) (ProcResources, error) {
	return ProcResources{}, errors.New("reading a process's resources needs Linux's /proc")
}
