// Package prefix writes a child process's output line by line, each line
// with a prefix naming the child, for flatline-bench and flatline-soak
// alike.
package prefix

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Writer writes each complete line written to it to its destination with
// its prefix. Give it to an exec.Cmd as Stdout or Stderr: exec copies the
// child's output into it from a goroutine of its own, which Wait waits for.
type Writer struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	buf    []byte
}

// NewWriter returns a Writer to w with prefix.
func NewWriter(w io.Writer, prefix string) *Writer { return &Writer{w: w, prefix: prefix} }

func (p *Writer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		_, _ = fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
