package testenv

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// LinkProxy forwards TCP connections to one server over a link a test can
// break, as a network between a client and its server breaks:
//
//   - Hang: every connection stays open, and the bytes sent either way are
//     read and dropped, so the client's calls get no answer and time out
//     (a route that black-holes packets, a peer on a node whose network
//     stalls). New connections are accepted and treated the same.
//   - Reset: every connection is closed with a TCP reset, and new ones are
//     reset as soon as they are accepted (a peer that is gone, a firewall
//     that rejects).
//   - Heal: the link forwards again. A connection that lost bytes while
//     hung is reset then, since its stream is broken (as a client's would
//     be after its timeout); one that carried nothing meanwhile goes on.
type LinkProxy struct {
	upstream string
	ln       net.Listener

	mode  atomic.Int32 // linkOpen, linkHung or linkReset
	mu    sync.Mutex
	conns map[*proxied]struct{}
	wg    sync.WaitGroup
}

const (
	linkOpen int32 = iota
	linkHung
	linkReset
)

// proxied is one client connection and its connection to the server.
type proxied struct {
	client, server net.Conn
	lost           atomic.Bool // bytes were dropped while the link hung
	once           sync.Once
}

// Proxy starts a LinkProxy on a free loopback port forwarding to upstream
// (host:port). It closes, with every connection, at the end of the test.
func Proxy(t testing.TB, upstream string) *LinkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: link proxy: %v", err)
	}
	p := &LinkProxy{upstream: upstream, ln: ln, conns: make(map[*proxied]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is where clients connect.
func (p *LinkProxy) Addr() string { return p.ln.Addr().String() }

// Hang makes the link drop every byte, keeping the connections open.
func (p *LinkProxy) Hang() { p.mode.Store(linkHung) }

// Reset resets every connection, and every new one, until Heal.
func (p *LinkProxy) Reset() {
	p.mode.Store(linkReset)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.reset()
	}
}

// Heal makes the link forward again; connections that lost bytes are reset.
func (p *LinkProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode.Store(linkOpen)
	for c := range p.conns {
		if c.lost.Load() {
			c.reset()
		}
	}
}

// Conns is how many client connections the proxy holds.
func (p *LinkProxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines.
func (p *LinkProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.reset()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *LinkProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if p.mode.Load() == linkReset {
			resetConn(client)
			continue
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			resetConn(client)
			continue
		}
		c := &proxied{client: client, server: server}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		if p.mode.Load() == linkReset {
			// Reset came while this one was being dialed, and did not
			// see it: reset it as Reset would have.
			c.reset()
		}
		p.wg.Add(2)
		go p.pipe(c, server, client)
		go p.pipe(c, client, server)
	}
}

// pipe copies src to dst while the link is open, drops what it reads while
// the link hangs, and ends both connections when either side ends.
func (p *LinkProxy) pipe(c *proxied, dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		c.reset()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch p.mode.Load() {
			case linkOpen:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			case linkReset:
				return // a connection Reset did not see: reset it
			default:
				c.lost.Store(true)
			}
		}
		if err != nil {
			return
		}
	}
}

// reset closes both connections with a TCP reset (once).
func (c *proxied) reset() {
	c.once.Do(func() {
		resetConn(c.client)
		resetConn(c.server)
	})
}

// resetConn closes conn with a reset rather than an orderly FIN.
func resetConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
