package e2etest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// LogBuffer keeps a process's log lines (the last max of them) for the
// report of a failed test, and lets a test watch for a line. It takes the
// output of an in-process instance's logger or of a child process.
type LogBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	max     int
	dropped int
	watch   []func(string)
}

// NewLogBuffer keeps the last max lines.
func NewLogBuffer(max int) *LogBuffer { return &LogBuffer{max: max} }

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		for _, w := range b.watch {
			w(line)
		}
		if len(b.lines) == b.max {
			b.lines = b.lines[1:]
			b.dropped++
		}
		b.lines = append(b.lines, line)
	}
	return len(p), nil
}

// Note adds a line of the test's own, such as an incarnation marker.
func (b *LogBuffer) Note(format string, args ...any) {
	_, _ = b.Write([]byte("---- " + fmt.Sprintf(format, args...) + "\n"))
}

// Watch calls fn with every line written from now on (under the buffer's
// lock: fn must not block).
func (b *LogBuffer) Watch(fn func(string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watch = append(b.watch, fn)
}

// Count returns how many kept lines contain s.
func (b *LogBuffer) Count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// DumpOnFailure logs the kept lines, under name, at the end of a failed
// test.
func (b *LogBuffer) DumpOnFailure(t testing.TB, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Logf("---- %s log (%d earlier lines dropped) ----\n%s", name, b.dropped, strings.Join(b.lines, "\n"))
	})
}
