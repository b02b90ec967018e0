package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
// The inspecting commands of cmd/flatline connect the same way as serve.
func Connect(ctx context.Context, rc redisconn.Config) (redis.UniversalClient, *shard.Store, error) {
	rdb, err := redisconn.New(rc)
	if err != nil {
		return nil, nil, err
	}
	store := shard.NewStore(rdb, shard.NewKeys(rc.KeyPrefix))
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := store.Ping(pctx); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis %v: %w", rc.Addrs, err)
	}
	if err := store.LoadScripts(pctx); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis %v: %w", rc.Addrs, err)
	}
	return rdb, store, nil
}

// checkKafka asks the brokers for the signals and timeouts topics' metadata:
// it fails when the brokers cannot be reached or refuse the credentials.
// Start-up and /readyz both use it.
func checkKafka(ctx context.Context, cfg configs.Config) error {
	tr, err := cfg.Kafka.Transport()
	if err != nil {
		return err
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Kafka.Brokers...), Transport: tr, Timeout: connectTimeout}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if _, err := client.Metadata(cctx, &kafka.MetadataRequest{Topics: []string{cfg.Kafka.SignalsTopic, cfg.Kafka.TimeoutsTopic}}); err != nil {
		// The client's own prefix names a Go method, not the problem.
		return fmt.Errorf("kafka %v: %s", cfg.Kafka.Brokers, strings.TrimPrefix(err.Error(), "kafka.(*Client).Metadata: "))
	}
	return nil
}

// LoadPolicy registers the configured classes and returns the policy. Class
// ids are shared by every instance through Redis (they are stored in the
// deadlines' scores), so the policy is built from what Redis holds, not
// from the order of this instance's configuration.
func LoadPolicy(ctx context.Context, store *shard.Store, tc timeouts.Config) (*timeouts.Policy, error) {
	names := tc.ClassNames()
	if _, err := store.RegisterClasses(ctx, names); err != nil {
		return nil, err
	}
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
