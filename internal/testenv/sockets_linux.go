package testenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcResources is what a process holds, read from /proc: its open files
// and its established TCP connections by the remote port they reach.
type ProcResources struct {
	FDs int
	// TCPTo counts established TCP connections by remote port.
	TCPTo map[int]int
}

// ReadProcResources reads pid's open files and TCP connections.
func ReadProcResources(pid int) (ProcResources, error) {
	dir := fmt.Sprintf("/proc/%d", pid)
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return ProcResources{}, err
	}
	res := ProcResources{FDs: len(fds), TCPTo: map[int]int{}}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] { // 01: ESTABLISHED
				continue
			}
			i := strings.LastIndexByte(f[2], ':')
			port, err := strconv.ParseInt(f[2][i+1:], 16, 32)
			if err == nil {
				res.TCPTo[int(port)]++
			}
		}
		_ = f.Close()
	}
	return res, nil
}
