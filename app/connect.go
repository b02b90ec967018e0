package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// connectTimeout bounds each start-up check, so a wrong address fails in
// seconds with an error naming it instead of hanging.
const connectTimeout = 5 * time.Second

// Connect opens the Redis client, checks it answers and loads the scripts.
// The commands that write (shards scale) connect this way; serve's store
// also announces its writes to the scanners (New).
func Connect(ctx context.Context, rc redisconn.Config) (redisconn.Client, *shard.Store, error) {
	return connect(ctx, rc, storeOptions(rc), true)
}

// ConnectReader opens the Redis client and checks it answers, loading no
// scripts: the read commands of cmd/flatline (device get, shards status)
// send Redis nothing that changes it, not even its script cache.
func ConnectReader(ctx context.Context, rc redisconn.Config) (redisconn.Client, *shard.Store, error) {
	return connect(ctx, rc, storeOptions(rc), false)
}

// storeOptions are the store's options from the redis section: the key
// prefix and what a write must reach (redis.wait_replicas).
func storeOptions(rc redisconn.Config) shard.Options {
	return shard.Options{Keys: shard.NewKeys(rc.KeyPrefix), Durability: shard.Durability{Replicas: rc.WaitReplicas, Timeout: rc.WaitTimeout}}
}

// connect opens the Redis client and the store on it with opts, checks
// Redis answers and, with scripts, loads them; each step within
// connectTimeout.
func connect(ctx context.Context, rc redisconn.Config, opts shard.Options, scripts bool) (redisconn.Client, *shard.Store, error) {
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	rdb, err := redisconn.New(pctx, rc)
	if err != nil {
		return nil, nil, err
	}
	store := shard.New(rdb, opts)
	err = store.Ping(pctx)
	if err == nil && scripts {
		lctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		err = store.LoadScripts(lctx)
	}
	if err != nil {
		_ = rdb.Close()
		return nil, nil, redisconn.OneLine(fmt.Errorf("redis %v: %w", rc.Addrs, err))
	}
	return rdb, store, nil
}

// checkRedisAtStart refuses to start on a server that may evict deadlines
// (an allkeys-* maxmemory-policy on any master: eviction drops a device
// without a trace, and its silence is never reported), and warns when
// persistence is off (a restart of that server empties every shard) or
// its small sorted sets are listpacks that make the down-set lookups
// scans (redisconn.ZsetListpackEntries).
// volatile-* policies are accepted: they evict only keys with an expiry,
// and flatline's only such keys are the scanner leases, whose loss costs
// at most a takeover. When the facts cannot be read (INFO denied) it
// warns and goes on, as the server's own refusals will then show.
func checkRedisAtStart(ctx context.Context, rdb redisconn.Client, rc redisconn.Config, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	masters, err := redisconn.Inspect(cctx, rdb, rc)
	if err != nil {
		log.Warn("cannot read the Redis maxmemory-policy and persistence; not checked", "err", err)
		return nil
	}
	for _, m := range masters {
		if redisconn.Evicts(m.MaxmemoryPolicy) {
			return fmt.Errorf("redis %s: maxmemory-policy is %s, which evicts deadlines when memory runs out and so loses timeouts: set maxmemory-policy noeviction (or a volatile-* policy)", m.Addr, m.MaxmemoryPolicy)
		}
	}
	for _, m := range masters {
		switch {
		case m.MaxmemoryPolicy == "":
			log.Warn("cannot read the Redis maxmemory-policy (neither CONFIG GET nor INFO memory); eviction not checked", "redis", m.Addr)
		case m.Persistence == redisconn.PersistOff:
			log.Warn("Redis persistence is off (no AOF, no RDB snapshots): a restart of this server loses every deadline it holds; enable appendonly, or rely on a replica that fails over",
				"redis", m.Addr, "replicas", m.Replicas)
		case m.Persistence == redisconn.PersistUnknown:
			log.Info("Redis has no AOF, and its RDB snapshot schedule cannot be read (CONFIG denied); make sure the service persists or replicates", "redis", m.Addr, "replicas", m.Replicas)
		}
		if m.ZsetListpackEntries > redisconn.ZsetListpackEntries {
			log.Warn(fmt.Sprintf("Redis keeps sorted sets of up to %d entries as listpacks, where a lookup scans every entry: each write to a shard whose down set is that small scans it once per heartbeat written; set zset-max-listpack-entries %d",
				m.ZsetListpackEntries, redisconn.ZsetListpackEntries), "redis", m.Addr)
		}
	}
	st := redisconn.Summarize(redisconn.ModeOf(rdb, rc), masters)
	log.Info("redis", "mode", st.Mode, "masters", len(masters), "maxmemory_policy", st.MaxmemoryPolicy, "persistence", st.Persistence, "replicas", st.Replicas)
	return nil
}

// checkKafka asks the brokers for the signals and timeouts topics' metadata:
// it fails when the brokers cannot be reached or refuse the credentials.
// /readyz uses it; start-up asks more of the brokers (checkKafkaAtStart).
func checkKafka(ctx context.Context, client *kafka.Client, cfg configs.Config) error {
	_, err := kafkaMetadata(ctx, client, cfg, []string{cfg.Kafka.SignalsTopic, cfg.Kafka.TimeoutsTopic})
	return err
}

func kafkaMetadata(ctx context.Context, client *kafka.Client, cfg configs.Config, topics []string) (*kafka.MetadataResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	md, err := client.Metadata(cctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		// The client's own prefix names a Go method, not the problem.
		return nil, fmt.Errorf("kafka %v: %s", cfg.Kafka.Brokers, strings.TrimPrefix(err.Error(), "kafka.(*Client).Metadata: "))
	}
	return md, nil
}

// kafkaClient is the instance's one client for its own questions to the
// brokers (start-up checks, /readyz), built once and closed last: one built
// per call would leave its connections and goroutines behind.
func kafkaClient(cfg configs.Config) (*kafka.Client, error) {
	return cfg.Kafka.Client(connectTimeout)
}

// checkKafkaAtStart refuses to start, with one line naming the problem, on
// what would otherwise only show as an instance that idles or retries
// forever behind a warning: a topic that does not exist (ingest would wait
// for partitions, dispatch would retry every event), or a session timeout
// the brokers refuse (every join of the consumer group would fail).
func checkKafkaAtStart(ctx context.Context, client *kafka.Client, cfg configs.Config, log *slog.Logger) error {
	need := []struct{ key, topic string }{
		{"kafka.signals_topic", cfg.Kafka.SignalsTopic},
		{"kafka.timeouts_topic", cfg.Kafka.TimeoutsTopic},
	}
	if cfg.Kafka.DeadLetterTopic != "" && cfg.HasRole(configs.RoleIngest) {
		need = append(need, struct{ key, topic string }{"kafka.dead_letter_topic", cfg.Kafka.DeadLetterTopic})
	}
	topics := make([]string, len(need))
	for i, n := range need {
		topics[i] = n.topic
	}
	md, err := kafkaMetadata(ctx, client, cfg, topics)
	if err != nil {
		return err
	}
	for _, n := range need {
		for _, t := range md.Topics {
			if t.Name != n.topic || t.Error == nil {
				continue
			}
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
				return fmt.Errorf("kafka: topic %q (%s) does not exist: create it, or name an existing topic", n.topic, n.key)
			}
			return fmt.Errorf("kafka: topic %q (%s): %v", n.topic, n.key, t.Error)
		}
	}
	if !cfg.HasRole(configs.RoleIngest) {
		return nil // only the consumer group has a session
	}
	lo, hi, err := sessionBounds(ctx, client, md)
	if err != nil {
		// Reading broker configs may be denied (DescribeConfigs ACL):
		// then the brokers' own refusal is what the operator sees.
		log.Warn("cannot read the brokers' session timeout bounds; kafka.session_timeout not checked", "err", err)
		return nil
	}
	if st := cfg.Kafka.SessionTimeout; st < lo || st > hi {
		return fmt.Errorf("kafka.session_timeout: %v is outside the brokers' group.min.session.timeout.ms and group.max.session.timeout.ms [%v, %v]", st, lo, hi)
	}
	return nil
}

// sessionBounds reads group.min/max.session.timeout.ms of one broker (they
// are cluster-wide settings in practice).
func sessionBounds(ctx context.Context, client *kafka.Client, md *kafka.MetadataResponse) (lo, hi time.Duration, err error) {
	if len(md.Brokers) == 0 {
		return 0, 0, errors.New("metadata lists no broker")
	}
	const minKey, maxKey = "group.min.session.timeout.ms", "group.max.session.timeout.ms"
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	resp, err := client.DescribeConfigs(cctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(md.Brokers[0].ID), ConfigNames: []string{minKey, maxKey},
	}}})
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Resources) != 1 {
		return 0, 0, fmt.Errorf("describe configs: %d resources in the answer", len(resp.Resources))
	}
	r := resp.Resources[0]
	if r.Error != nil {
		return 0, 0, r.Error
	}
	for _, e := range r.ConfigEntries {
		ms, perr := strconv.ParseInt(e.ConfigValue, 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("%s: %q", e.ConfigName, e.ConfigValue)
		}
		switch e.ConfigName {
		case minKey:
			lo = time.Duration(ms) * time.Millisecond
		case maxKey:
			hi = time.Duration(ms) * time.Millisecond
		}
	}
	if lo == 0 || hi == 0 {
		return 0, 0, fmt.Errorf("the broker reported neither %s nor %s", minKey, maxKey)
	}
	return lo, hi, nil
}

// loadPolicy registers the configured classes and returns the policy. Class
// ids are shared by every instance through Redis (they are stored in the
// deadlines' scores), so the policy is built from what Redis holds, not
// from the order of this instance's configuration.
func loadPolicy(ctx context.Context, store *shard.Store, tc timeouts.Config) (*timeouts.Policy, error) {
	names := tc.ClassNames()
	if _, err := store.RegisterClasses(ctx, names); err != nil {
		return nil, err
	}
	return ReadPolicy(ctx, store, tc)
}

// ReadPolicy returns the policy over the class registry as Redis holds it,
// registering nothing: for the read commands. A configured class that no
// instance registered yet has no id, which is no loss: no score carries it.
func ReadPolicy(ctx context.Context, store *shard.Store, tc timeouts.Config) (*timeouts.Policy, error) {
	reg, err := store.ClassNames(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]int, len(reg))
	for id, name := range reg {
		ids[name] = id
	}
	return timeouts.NewPolicy(tc, ids), nil
}
