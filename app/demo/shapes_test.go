package demo_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app/demo"
	"github.com/flatline-dev/flatline/internal/simulate"
	"github.com/flatline-dev/flatline/internal/testenv"
)

var trackedRe = regexp.MustCompile(`tracked +(\d+)`)

// TestDevReadsEveryShape: `flatline dev --shape X` writes the fleet in
// shape X and configures flatline to read it, so the fleet is tracked (a
// shape read wrongly would dead-letter every heartbeat and track none).
func TestDevReadsEveryShape(t *testing.T) {
	for _, shape := range []simulate.Shape{simulate.ShapeEMQX5, simulate.ShapeEMQX4, simulate.ShapeMQTTTopic, simulate.ShapeAzure, simulate.ShapeAvro} {
		t.Run(string(shape), func(t *testing.T) {
			t.Parallel()
			var out, errOut testenv.SyncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- demo.RunDev(ctx, demo.DevOptions{Devices: 200, Interval: 200 * time.Millisecond, Timeout: time.Second,
					Silent: 0, HTTPAddr: "127.0.0.1:0", Shape: shape}, &out, &errOut, "warn")
			}()
			deadline := time.After(60 * time.Second)
			for tracked := 0; tracked < 200; {
				select {
				case err := <-done:
					cancel()
					t.Fatalf("dev stopped: %v\n%s\n%s", err, out.String(), errOut.String())
				case <-deadline:
					cancel()
					<-done
					t.Fatalf("the fleet of 200 was not tracked within 60 s (last: %d)\n%s\n%s", tracked, out.String(), errOut.String())
				case <-time.After(100 * time.Millisecond):
				}
				if m := trackedRe.FindAllStringSubmatch(out.String(), -1); len(m) > 0 {
					tracked, _ = strconv.Atoi(m[len(m)-1][1])
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("dev: %v", err)
			}
			if !strings.Contains(out.String(), "shape: "+string(shape)) {
				t.Errorf("dev did not say which shape it reads:\n%s", out.String())
			}
		})
	}
}
