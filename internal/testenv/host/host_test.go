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
	// Spin until this process has used 50 ms of CPU: the machine's busy
	// time must have grown by at least that (ticks of 10 ms, so less one).
	for ReadProc(os.Getpid()).CPU-self < 50*time.Millisecond {
		for i := 0; i < 1_000_000; i++ {
			_ = i * i
		}
	}
	after := ReadCPUTimes()
	if grew := after.Busy - before.Busy; grew < 40*time.Millisecond {
		t.Fatalf("machine busy time grew %v while this process used 50 ms", grew)
	}
	if after.Steal < before.Steal {
		t.Fatalf("steal went back: %v then %v", before.Steal, after.Steal)
	}
}
