package testenv

import (
	"net"
	"sync"
)

// stoppingListener is a broker's listener whose Close also closes the
// connections it accepted. kfake's Cluster.RemoveNode closes only the
// removed broker's listener: the clients' open connections stay served by
// the removed broker, which answers every request as a broker that leads
// nothing. A client that kept such a connection and saw the node come back
// (AddNode with the same ID and port) kept asking the old broker, was told
// NOT_LEADER with the new one as leader — the same node ID at the same
// address — and never reconnected. A Kafka broker that stops drops its
// connections; with this listener a removed kfake node does too.
type stoppingListener struct {
	net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// listenStopping is kfake's ListenFn for the test clusters.
func listenStopping(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &stoppingListener{Listener: ln, conns: make(map[net.Conn]struct{})}, nil
}

func (l *stoppingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops accepting and closes every connection still open.
func (l *stoppingListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = make(map[net.Conn]struct{})
	l.mu.Unlock()
	for c := range conns {
		_ = c.(*trackedConn).Conn.Close()
	}
	return err
}

// trackedConn leaves its listener's set when it is closed, so a
// long-running cluster does not keep every connection it ever accepted.
type trackedConn struct {
	net.Conn
	l    *stoppingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
