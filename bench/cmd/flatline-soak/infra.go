package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/app/demo"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// signalsRetention bounds what kfake keeps of the signals topic: at 5,000
// beats/s a 20-minute run would otherwise hold six million records in this
// process. flatline reads within seconds of the head (and resumes from
// offsets committed seconds ago), so five minutes is ample.
const signalsRetention = 5 * time.Minute

// infra is what the instances share: a kfake cluster with flatline's
// topics and a private redis-server.
type infra struct {
	topics    configs.Config // the default settings: topic names, group
	kafka     *kfake.Cluster
	brokers   []string
	kafkaPort int
	redisAddr string
	redisPort int
	rdb       *redis.Client // this program's own client: INFO only
	redis     *testenv.RedisServer
}

// startInfra starts Kafka and Redis. Unlike the tests' and the demo's
// Kafka, this one keeps Kafka's 6 s floor on group session timeouts:
// flatline runs with its default kafka.session_timeout, as in production.
func startInfra(ctx context.Context, partitions int) (*infra, error) {
	in := &infra{topics: configs.Default()}
	k := in.topics.Kafka
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), k.SignalsTopic, k.TimeoutsTopic, k.DeadLetterTopic),
		// Small segments: see demo.SegmentBytes.
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(demo.SegmentBytes)}),
	)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	in.kafka = c
	in.brokers = c.ListenAddrs()
	if in.kafkaPort, err = portOf(in.brokers[0]); err != nil {
		c.Close()
		return nil, err
	}
	// A real redis-server: the soak reads its connected_clients and its
	// own connections.
	srv, err := testenv.StartRedis("--zset-max-listpack-entries", strconv.Itoa(redisconn.ZsetListpackEntries))
	if err != nil {
		c.Close()
		return nil, err
	}
	addr := srv.Addr()
	in.redisAddr, in.redis = addr, srv
	if in.redisPort, err = portOf(addr); err != nil {
		in.close()
		return nil, err
	}
	in.rdb = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	if err := setRetention(ctx, in.brokers, k.SignalsTopic, signalsRetention); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

func (in *infra) close() {
	if in.rdb != nil {
		_ = in.rdb.Close()
	}
	if in.redis != nil {
		in.redis.Close()
	}
	in.kafka.Close()
}

// connectedClients is INFO clients' connected_clients: every client of the
// server, this program's one included.
func (in *infra) connectedClients(ctx context.Context) (int, error) {
	info, err := in.rdb.Info(ctx, "clients").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO clients has no connected_clients")
}

// trimSignals applies the signals topic's retention every minute until
// ctx ends: kfake only does so by itself on its hourly cleaner tick.
func (in *infra) trimSignals(ctx context.Context) error {
	return every(ctx, time.Minute, func(time.Time) bool {
		in.kafka.ApplyRetention()
		return true
	})
}

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", addr, err)
	}
	return strconv.Atoi(p)
}
