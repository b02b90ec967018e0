package redisconn

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Persistence values of Master and Status: what survives a restart of the
// server.
const (
	// PersistOff: neither AOF nor RDB snapshots; a restart empties it.
	PersistOff = "off"
	// PersistUnknown: no AOF, and the snapshot schedule cannot be read
	// (CONFIG is disabled, as on most managed services, which persist by
	// their own means).
	PersistUnknown = "unknown"
	// PersistRDB: periodic RDB snapshots only.
	PersistRDB = "rdb"
	// PersistAOF: the append-only file (whatever the snapshots).
	PersistAOF = "aof"
	// PersistAOFRDB: both.
	PersistAOFRDB = "aof+rdb"
)

// persistRank orders the persistence values from weakest to strongest.
var persistRank = []string{PersistOff, PersistUnknown, PersistRDB, PersistAOF, PersistAOFRDB}

// Master is what Inspect read of one master (a cluster has several).
type Master struct {
	// Addr names the master: its address, or "sentinel master <name>".
	Addr string
	// MaxmemoryPolicy is its maxmemory-policy (CONFIG GET, else INFO
	// memory); "" when neither could be read.
	MaxmemoryPolicy string
	// Persistence is one of the Persist* values.
	Persistence string
	// Replicas is its connected_slaves (INFO replication).
	Replicas int
	// ZsetListpackEntries is its zset-max-listpack-entries (CONFIG GET;
	// zset-max-ziplist-entries before Redis 7); -1 when it cannot be read.
	ZsetListpackEntries int
}

// ZsetListpackEntries is the zset-max-listpack-entries flatline asks of its
// Redis. A sorted set of up to that many entries is kept as a listpack,
// where finding a member is a scan of every entry: a shard's down set,
// which every write to the shard looks its members up in, is often that
// small, and a lookup of 50 members in a down set of 120 entries took
// 72.5 µs as a listpack against 2.9 µs with 129 entries, past Redis's
// default of 128 (docs/operations.md, "Redis").
const ZsetListpackEntries = 16

// Status is the "redis" object of /status.
type Status struct {
	// Mode is standalone, cluster or sentinel (what auto resolved to).
	Mode string `json:"mode"`
	// MaxmemoryPolicy is the masters' maxmemory-policy; when they differ,
	// their distinct policies sorted and joined by ","; "unknown" where it
	// could not be read.
	MaxmemoryPolicy string `json:"maxmemory_policy"`
	// Persistence is the weakest of the masters' (off < unknown < rdb <
	// aof < aof+rdb).
	Persistence string `json:"persistence"`
	// Replicas is the fewest connected replicas of any master: how many
	// copies of every shard's deadlines exist beside the masters'.
	Replicas int `json:"replicas"`
	// Error says why the facts above are missing, when they are.
	Error string `json:"error,omitempty"`
}

// Inspect reads every master's maxmemory-policy, persistence and connected
// replicas: the masters of a cluster, the Sentinel set's current master,
// or the one server. It only reads (CONFIG GET, INFO).
func Inspect(ctx context.Context, rdb Client, c Config) ([]Master, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var (
			mu  sync.Mutex
			out []Master
		)
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			m, err := inspect(ctx, n, n.Options().Addr)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, m)
			mu.Unlock()
			return nil
		})
		slices.SortFunc(out, func(a, b Master) int { return strings.Compare(a.Addr, b.Addr) })
		return out, err
	}
	name := c.Addrs[0]
	if c.Mode == ModeSentinel {
		name = "sentinel master " + c.Sentinel.Master
	}
	m, err := inspect(ctx, rdb, name)
	if err != nil {
		return nil, err
	}
	return []Master{m}, nil
}

// inspect reads one master.
func inspect(ctx context.Context, rdb redis.Cmdable, name string) (Master, error) {
	text, err := rdb.Info(ctx).Result()
	if err != nil {
		return Master{}, fmt.Errorf("%s: INFO: %s", name, oneLine(err))
	}
	info := ParseInfo(text)
	m := Master{Addr: name, MaxmemoryPolicy: info["maxmemory_policy"]}
	m.Replicas, _ = strconv.Atoi(info["connected_slaves"])
	// CONFIG GET is authoritative where it is allowed; INFO memory has
	// carried maxmemory_policy since Redis 4 and is what managed services
	// that disable CONFIG still answer.
	if p, err := configGet(ctx, rdb, "maxmemory-policy"); err == nil && p != "" {
		m.MaxmemoryPolicy = p
	}
	m.ZsetListpackEntries = -1
	for _, param := range []string{"zset-max-listpack-entries", "zset-max-ziplist-entries"} {
		if v, err := configGet(ctx, rdb, param); err == nil {
			if n, err := strconv.Atoi(v); err == nil {
				m.ZsetListpackEntries = n
				break
			}
		}
	}
	aof := info["aof_enabled"] == "1"
	save, serr := configGet(ctx, rdb, "save")
	switch {
	case aof && serr == nil && strings.TrimSpace(save) != "":
		m.Persistence = PersistAOFRDB
	case aof:
		m.Persistence = PersistAOF
	case serr != nil:
		m.Persistence = PersistUnknown
	case strings.TrimSpace(save) != "":
		m.Persistence = PersistRDB
	default:
		m.Persistence = PersistOff
	}
	return m, nil
}

// configGet reads one parameter; an error when CONFIG is denied, renamed
// or does not know it.
func configGet(ctx context.Context, rdb redis.Cmdable, param string) (string, error) {
	vals, err := rdb.ConfigGet(ctx, param).Result()
	if err != nil {
		return "", err
	}
	v, ok := vals[param]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", param)
	}
	return v, nil
}

// Summarize folds the masters into the /status object.
func Summarize(mode string, masters []Master) Status {
	st := Status{Mode: mode}
	var policies []string
	for i, m := range masters {
		p := m.MaxmemoryPolicy
		if p == "" {
			p = "unknown"
		}
		if !slices.Contains(policies, p) {
			policies = append(policies, p)
		}
		if i == 0 || slices.Index(persistRank, m.Persistence) < slices.Index(persistRank, st.Persistence) {
			st.Persistence = m.Persistence
		}
		if i == 0 || m.Replicas < st.Replicas {
			st.Replicas = m.Replicas
		}
	}
	slices.Sort(policies)
	st.MaxmemoryPolicy = strings.Join(policies, ",")
	return st
}

// Evicts reports whether policy lets Redis evict keys that have no expiry,
// which would silently drop deadlines: the allkeys-* policies.
func Evicts(policy string) bool { return strings.HasPrefix(policy, "allkeys-") }

// ReadStatus is the /status object of the deployment rdb was built for
// from c; when the masters cannot be read it carries the mode and the error.
func ReadStatus(ctx context.Context, rdb Client, c Config) Status {
	masters, err := Inspect(ctx, rdb, c)
	if err != nil {
		return Status{Mode: ModeOf(rdb, c), Error: err.Error()}
	}
	return Summarize(ModeOf(rdb, c), masters)
}
