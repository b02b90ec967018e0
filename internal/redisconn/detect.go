package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// detect resolves redis.mode auto. Several addresses are a cluster's seed
// nodes. One address is asked: a managed cluster's configuration endpoint
// (or any node of a cluster) reports cluster_enabled:1 in INFO, and must be
// reached with a cluster client, since a plain one would meet MOVED for
// every key another node holds.
func detect(ctx context.Context, c Config, tc *tls.Config) (string, error) {
	if len(c.Addrs) > 1 {
		return ModeCluster, nil
	}
	addr := c.Addrs[0]
	rc := redis.NewClient(&redis.Options{
		Addr: addr, Username: c.Username, Password: c.Password, TLSConfig: tc,
		MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true,
	})
	defer rc.Close()
	// Plain INFO: its default sections hold server and cluster on every
	// version (INFO with several sections needs Redis 7).
	text, err := rc.Info(ctx).Result()
	if err == nil {
		info := ParseInfo(text)
		switch {
		case info["redis_mode"] == "sentinel":
			return "", fmt.Errorf("redis %s is a Sentinel: set redis.mode: sentinel and redis.sentinel.master (the master set's name)", addr)
		case info["redis_mode"] == "cluster" || info["cluster_enabled"] == "1":
			return ModeCluster, nil
		}
		return ModeStandalone, nil
	}
	if !deniedCommand(err) {
		return "", fmt.Errorf("redis %s: %s", addr, oneLine(err))
	}
	// INFO may be denied by an ACL or renamed, as on some managed
	// services: CLUSTER INFO answers on a cluster node and names the
	// disabled cluster support elsewhere.
	_, cerr := rc.ClusterInfo(ctx).Result()
	switch {
	case cerr == nil:
		return ModeCluster, nil
	case strings.Contains(cerr.Error(), "cluster support disabled"):
		return ModeStandalone, nil
	}
	return "", fmt.Errorf("redis %s: cannot tell whether cluster mode is enabled (INFO: %s; CLUSTER INFO: %s): set redis.mode to standalone or cluster",
		addr, oneLine(err), oneLine(cerr))
}

// deniedCommand reports whether err is the server refusing this command
// (an ACL without it, or a command renamed away), not the connection or
// the credentials failing.
func deniedCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown command")
}

// ParseInfo turns an INFO reply into its fields ("redis_mode" ->
// "standalone"); section headers and blank lines are skipped.
func ParseInfo(text string) map[string]string {
	out := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// OneLine keeps err on one line, as flatline's errors reach the terminal:
// a server's message may span several, and go-redis joins the answers of
// all the Sentinels it tried with newlines. Repeated lines are said once.
// The result wraps err.
func OneLine(err error) error {
	if err == nil || !strings.ContainsAny(err.Error(), "\r\n") {
		return err
	}
	return lineError{msg: oneLine(err), err: err}
}

type lineError struct {
	msg string
	err error
}

func (e lineError) Error() string { return e.msg }
func (e lineError) Unwrap() error { return e.err }

func oneLine(err error) string {
	var parts []string
	for _, l := range strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.Join(strings.Fields(l), " ")
		if l != "" && !slices.ContainsFunc(parts, func(p string) bool { return strings.HasSuffix(p, l) }) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
