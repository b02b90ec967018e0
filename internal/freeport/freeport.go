// Package freeport finds a free loopback TCP port, for a server started as
// a child process (flatline dev's redis-server, the tests' servers).
package freeport

import (
	"fmt"
	"net"
)

// Loopback asks the kernel for a free 127.0.0.1 port and releases it for
// the caller to bind; a caller retries when something else took it
// meanwhile.
func Loopback() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
