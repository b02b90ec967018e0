package host

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestReadCPUTimesCountsThisProcesssWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	before, self := ReadCPUTimes(), ReadProc(os.Getpid()).CPU
	// Spin until this process has used 200 ms of CPU: the machine's busy
	// time must have grown by most of that. Not all: both are counted in
	// 10 ms ticks, and /proc/stat and /proc/<pid>/stat are brought up to
	// date at different moments (seen: 30 ms against 50).
	for ReadProc(os.Getpid()).CPU-self < 200*time.Millisecond {
		for i := 0; i < 1_000_000; i++ {
			_ = i * i
		}
	}
	after := ReadCPUTimes()
	if grew := after.Busy - before.Busy; grew < 100*time.Millisecond {
		t.Fatalf("machine busy time grew %v while this process used 200 ms", grew)
	}
	if after.Steal < before.Steal {
		t.Fatalf("steal went back: %v then %v", before.Steal, after.Steal)
	}
}
