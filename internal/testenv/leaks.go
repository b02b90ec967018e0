package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
)

// VerifyTestMain runs a package's tests, then fails them when a goroutine
// they started still runs (go.uber.org/goleak, which waits a little for
// goroutines on their way out): every goroutine must have an owner that
// waits for it. Call it from the package's TestMain.
//
// kafka-go's DefaultTransport, which test producers and readers without a
// Transport of their own share, keeps a pool per broker address for the
// life of the process; its pools are closed first, since no test owns
// them.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if tr, ok := kafka.DefaultTransport.(*kafka.Transport); ok {
			tr.CloseIdleConnections()
		}
		if err := findLeaks(3 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find given up to wait for goroutines on their way
// out. goleak's own wait is about 0.4 s; go-redis's dial retry
// (pool.tryDial), started when a dial fails, sleeps a second between
// dials and sees its pool closed only when it wakes.
func findLeaks(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	err := goleak.Find()
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		err = goleak.Find()
	}
	return err
}
