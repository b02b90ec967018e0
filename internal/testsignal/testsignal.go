// Package testsignal lets a test wait on what a running part did, instead
// of sleeping, at the cost of one nil check when no test listens (river's
// rivershared/testsignal). A part keeps its signals in a TestSignals field
// and sends on them; a test calls that struct's Init before the part runs
// and receives from C.
package testsignal

// TB is what a signal reports a misuse to: a *testing.T or *testing.B.
type TB interface {
	Errorf(format string, args ...any)
}

// size is how many values a signal holds before a test reads them.
const size = 1024

// Signal carries values of type T from a part to a test. The zero Signal is
// off: Send drops its value.
type Signal[T any] struct {
	c  chan T
	tb TB
}

// Init turns the signal on. Call it from the test, before the part that
// sends runs.
func (s *Signal[T]) Init(tb TB) {
	s.c = make(chan T, size)
	s.tb = tb
}

// Send hands v to the test, if one listens. It never blocks: a full signal
// fails the test (it left more than size values unread).
func (s *Signal[T]) Send(v T) {
	if s.c == nil {
		return
	}
	select {
	case s.c <- v:
	default:
		s.tb.Errorf("testsignal: %d values unread; the test must read them", size)
	}
}

// C is the channel the values arrive on; it panics when the signal is off.
func (s *Signal[T]) C() <-chan T {
	if s.c == nil {
		panic("testsignal: C of a signal not Init")
	}
	return s.c
}
