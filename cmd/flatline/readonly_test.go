package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// readCommands are the Redis commands a read command may send: the
// connection's handshake and reads. A command missing here fails
// TestReadCommandsNeverWriteToRedis by name; add it only if it is a read.
var readCommands = map[string]bool{
	"hello": true, "client": true, "select": true, "auth": true, "ping": true,
	"get": true, "mget": true, "hget": true, "hmget": true, "hgetall": true,
	"zscore": true, "zmscore": true, "zrange": true, "zcard": true, "zscan": true, "zcount": true,
	// redis.mode auto asks whether cluster mode is enabled; shards status
	// reads the masters' facts (its CONFIG GET is one MONITOR never shows).
	"info": true,
}

// monitor watches every command the redis-server at addr receives from now
// on, through MONITOR on a connection of its own. The returned func stops
// watching and returns the command names received until then, in order.
func monitor(t *testing.T, addr string, rdb redis.UniversalClient) func() []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	return func() []string {
		t.Helper()
		// Redis relays commands to a monitor in the order it runs them, so
		// once the marker arrives, everything sent before it has.
		marker := fmt.Sprintf("end-of-%s-%d", t.Name(), time.Now().UnixNano())
		if err := rdb.Echo(context.Background(), marker).Err(); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var cmds []string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading MONITOR: %v (so far %q)", err, cmds)
			}
			if strings.Contains(line, marker) {
				return cmds
			}
			// +1700000000.123456 [0 127.0.0.1:5000] "zscore" "key" "member"
			_, rest, ok := strings.Cut(line, "] \"")
			name, _, ok2 := strings.Cut(rest, "\"")
			if !ok || !ok2 {
				t.Fatalf("MONITOR line %q", line)
			}
			cmds = append(cmds, strings.ToLower(name))
		}
	}
}

// snapshot is every key of the database with its type and value, enough to
// see that nothing changed.
func snapshot(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		dump, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = dump
	}
	return out
}

func TestReadCommandsNeverWriteToRedis(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.track(t, "d-1", "cam", time.Now().Add(time.Minute))
	f.down(t, "", map[string]time.Time{"d-2": time.Now()})
	// "gw" is configured but in no registry yet: looking a device up must
	// not register it.
	var env []string
	for _, kv := range f.env {
		if strings.HasPrefix(kv, "FLATLINE_TIMEOUTS_CLASSES=") {
			kv = "FLATLINE_TIMEOUTS_CLASSES=cam=30s,gw=1m"
		}
		env = append(env, kv)
	}
	addr := strings.TrimPrefix(f.env[0], "FLATLINE_REDIS_ADDRS=")
	// An open maintenance window holding d-1: status, list and device get
	// read its records too.
	holdByWindow(t, f, "d-1")

	for _, args := range [][]string{
		{"device", "get", "d-1"},
		{"device", "get", "d-2", "-o", "json"},
		{"device", "get", "nosuch"},
		{"shards", "status"},
		{"shards", "status", "-o", "json"},
		{"devices", "down"},
		{"devices", "down", "--class", "cam", "-o", "json"},
		{"config", "print"},
		{"maintenance", "list", "--all", "-o", "json"},
		{"maintenance", "list"},
	} {
		before := snapshot(t, f.rdb)
		stop := monitor(t, addr, f.rdb)
		r := run(t, env, args...)
		cmds := stop()
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		for _, c := range cmds {
			if !readCommands[c] {
				t.Errorf("%v sent %q to Redis (all: %q)", args, c, cmds)
			}
		}
		if after := snapshot(t, f.rdb); !reflect.DeepEqual(before, after) {
			t.Errorf("%v changed Redis: keys %d -> %d", args, len(before), len(after))
		}
	}
}
