// Package host reads what Linux says in /proc about a process (its CPU
// time and resident memory) and about the machine a run happened on, for
// flatline-bench, flatline-soak and the end-to-end tests alike. Off Linux
// every figure is zero.
package host

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Proc is what /proc says about a process: CPU time used so far and the
// resident set, now and at its peak.
type Proc struct {
	CPU      time.Duration
	PeakRSS  int64 // VmHWM, bytes
	RSS      int64 // VmRSS, bytes
	Observed bool  // /proc/<pid>/stat was read
}

// clockTick is USER_HZ, 100 on every Linux flatline targets.
const clockTick = 100

// ReadProc reads pid's CPU time and resident set; a process that is gone
// (or a pid <= 0) reads as the zero Proc.
func ReadProc(pid int) Proc {
	var st Proc
	if pid <= 0 {
		return st
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st
	}
	// Fields after the parenthesised command name (which may hold spaces).
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) > 12 {
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stt, _ := strconv.ParseInt(f[12], 10, 64)
		st.CPU = time.Duration(ut+stt) * time.Second / clockTick
		st.Observed = true
	}
	if sf, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status"); err == nil {
		sc := bufio.NewScanner(sf)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				st.PeakRSS = parseKB(v)
			} else if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				st.RSS = parseKB(v)
			}
		}
		_ = sf.Close()
	}
	return st
}

// parseKB reads "<n> kB" as bytes.
func parseKB(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n << 10
}

// Machine describes where a run happened.
type Machine struct {
	CPUModel     string `json:"cpu_model"`
	Cores        int    `json:"cores"`
	MemoryBytes  int64  `json:"memory_bytes"`
	GoVersion    string `json:"go_version"`
	RedisVersion string `json:"redis_server_version"`
	Kernel       string `json:"kernel"`
	OSArch       string `json:"os_arch"`
}

// DescribeMachine reads the machine's description, the redis-server on
// PATH included.
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemoryBytes = parseKB(v)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.RedisVersion = v
			}
		}
	}
	return m
}

// LoadAverage is the 1-minute load average.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// CPUTimes is the machine's CPU time so far, summed over its cores, from
// the first line of /proc/stat.
type CPUTimes struct {
	// Busy is time the cores ran anything: user, nice, system, irq and
	// softirq (guests count in user).
	Busy time.Duration
	// Steal is time a virtual machine's cores were ready to run and the
	// hypervisor ran something else: on a shared host, the part of a
	// stall no process on this machine caused or can see.
	Steal time.Duration
}

// ReadCPUTimes reads the machine's CPU times; off Linux they are zero.
func ReadCPUTimes() CPUTimes {
	var t CPUTimes
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return t
	}
	tick := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / clockTick
	}
	// cpu user nice system idle iowait irq softirq steal ...
	t.Busy = tick(1) + tick(2) + tick(3) + tick(6) + tick(7)
	t.Steal = tick(8)
	return t
}
