package faults_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// reapGhosts works around a kfake bug until the test ends: a classic-group
// member whose connection dies while its JoinGroup waits (a process killed
// while joining) never gets a session timer in kfake, because
// (*group).reply arms it only when the reply was delivered, and the
// leader's SyncGroup clears the pending-sync timer that would otherwise
// remove it. Such a ghost keeps its share of the partitions forever and
// the live instance never reads them. A real broker expires it after the
// session timeout; so does this reaper: a member whose client connection
// no longer exists (no ESTABLISHED socket from its host:port) for longer
// than the session timeout is removed with LeaveGroup. Each reap is
// logged.
func reapGhosts(t *testing.T, brokers []string, group string, session time.Duration) (stop func() int) {
	var reaped atomic.Int64
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	goneSince := map[string]time.Time{}
	stopPoll := pollEvery(t, 250*time.Millisecond, func(ctx context.Context) {
		resp, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err != nil || len(resp.Groups) != 1 {
			return
		}
		live := establishedLocalPorts()
		seen := map[string]bool{}
		for _, m := range resp.Groups[0].Members {
			seen[m.MemberID] = true
			_, port, err := net.SplitHostPort(m.ClientHost)
			if err != nil || live[port] {
				delete(goneSince, m.MemberID)
				continue
			}
			since, ok := goneSince[m.MemberID]
			if !ok {
				goneSince[m.MemberID] = time.Now()
				continue
			}
			if time.Since(since) < session+2*time.Second {
				continue
			}
			_, err = c.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: []kafka.LeaveGroupRequestMember{{ID: m.MemberID}}})
			if err == nil {
				reaped.Add(1)
				t.Logf("kfake workaround: removed ghost member %s (client %s gone for %v)", m.MemberID, m.ClientHost, time.Since(since).Round(time.Millisecond))
				delete(goneSince, m.MemberID)
			}
		}
		for id := range goneSince {
			if !seen[id] {
				delete(goneSince, id)
			}
		}
	})
	return func() int {
		stopPoll()
		return int(reaped.Load())
	}
}

// establishedLocalPorts returns the local ports (decimal strings) of the
// machine's ESTABLISHED TCP sockets, from /proc/net/tcp and tcp6.
func establishedLocalPorts() map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "01" {
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if i < 0 {
				continue
			}
			if port, err := strconv.ParseUint(fs[1][i+1:], 16, 16); err == nil {
				out[strconv.FormatUint(port, 10)] = true
			}
		}
	}
	return out
}
