package demo_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app/demo"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

func TestStartKafka(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	brokers, stop, err := demo.StartKafka(ctx, 3, "device-signals", "device-timeouts")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        "device-timeouts",
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond,
	}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("d-1"), Value: []byte("{}")}); err != nil {
		t.Fatalf("write: %v", err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions("device-signals")
	if err != nil || len(parts) != 3 {
		t.Fatalf("device-signals partitions: %d, %v; want 3", len(parts), err)
	}
	// The broker runs with small segments (demo.SegmentBytes says why).
	cl := &kafka.Client{Addr: kafka.TCP(brokers...)}
	resp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: "0", ConfigNames: []string{"log.segment.bytes"},
	}}})
	if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].ConfigEntries) != 1 {
		t.Fatalf("describe log.segment.bytes: %+v, %v", resp, err)
	}
	if got, want := resp.Resources[0].ConfigEntries[0].ConfigValue, strconv.Itoa(demo.SegmentBytes); got != want {
		t.Fatalf("log.segment.bytes = %s, want %s", got, want)
	}
}

func TestStartRedisServer(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	t.Parallel()
	addr, kind, stop, err := demo.StartRedis(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if kind != demo.RedisServer {
		t.Fatalf("kind %q, want %q", kind, demo.RedisServer)
	}
	exerciseFlatlineCommands(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	got, err := rdb.ConfigGet(context.Background(), "zset-max-listpack-entries").Result()
	_ = rdb.Close()
	if want := strconv.Itoa(redisconn.ZsetListpackEntries); err != nil || got["zset-max-listpack-entries"] != want {
		t.Errorf("zset-max-listpack-entries %v (%v), want %s as docs/operations.md asks of production", got, err, want)
	}
	stop()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after stop", addr)
	}
	stop() // idempotent
}

// Without redis-server on PATH, StartRedis falls back to miniredis. Not
// parallel: it changes PATH.
func TestStartRedisFallsBackToMiniredis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	addr, kind, stop, err := demo.StartRedis(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if kind != demo.Miniredis {
		t.Fatalf("kind %q, want %q", kind, demo.Miniredis)
	}
	exerciseFlatlineCommands(t, addr)
}

// TestMiniredisLeaseExpires: leases (SET NX PX, PEXPIRE in a script) must
// expire in real time for another instance to take a shard over.
func TestMiniredisLeaseExpires(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := context.Background()
	addr, _, stop, err := demo.StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if ok, err := c.SetNX(ctx, "lease", "a", 50*time.Millisecond).Result(); err != nil || !ok {
		t.Fatalf("SET NX PX: %v, %v", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.Exists(ctx, "lease").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMiniredisDirect(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	exerciseFlatlineCommands(t, m.Addr())
}

// The command forms flatline's shard store uses, run through Lua by EVALSHA
// (go-redis Script.Run) and directly, checked for Redis semantics.
var (
	// ZADD GT with many pairs through unpack, as fired.lua does (the down set).
	zaddGT = redis.NewScript(`
local n = tonumber(ARGV[1])
local pairs_ = {}
for k = 2, 2 * n + 1 do pairs_[#pairs_ + 1] = ARGV[k] end
local i = 1
while i <= #pairs_ do
  local j = math.min(i + 3999, #pairs_)
  redis.call('ZADD', KEYS[1], 'GT', unpack(pairs_, i, j))
  i = j + 1
end
return redis.call('ZMSCORE', KEYS[1], ARGV[3], 'missing')
`)
	// Conditional removal, as fired.lua does.
	removeIf = redis.NewScript(`
local removed = 0
for k = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[k])
    redis.call('HDEL', KEYS[2], ARGV[k])
    removed = removed + 1
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. '5')
return removed
`)
	hashes = redis.NewScript(`
local id = redis.call('HGET', KEYS[1], 'n:x')
if not id then
  id = redis.call('HINCRBY', KEYS[1], 'next', 1)
  if id > tonumber(ARGV[1]) then
    return redis.error_reply('registry full')
  end
  redis.call('HSET', KEYS[1], 'n:x', id, 'i:' .. id, 'x')
end
return {tonumber(id), redis.call('EXISTS', KEYS[1])}
`)
	renew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)
)

func exerciseFlatlineCommands(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Scores near 2^53, as shard scores are: exact through Lua and back.
	const big = float64(1<<53 - 1)
	must(c.ZAdd(ctx, "{0}:d", redis.Z{Score: big - 10, Member: "a"}, redis.Z{Score: 100, Member: "b"}).Err())
	// 3000 pairs: a later score for a, an earlier one for b (ignored by GT),
	// and many new members.
	args := []any{3000, big, "a", 50, "b"}
	for i := 2; i < 3000; i++ {
		args = append(args, i, fmt.Sprintf("m%d", i))
	}
	res, err := zaddGT.Run(ctx, c, []string{"{0}:d"}, args...).Slice()
	must(err)
	if len(res) != 2 || res[1] != nil {
		t.Fatalf("ZMSCORE via Lua: %v", res)
	}
	if s := c.ZScore(ctx, "{0}:d", "a").Val(); s != big {
		t.Fatalf("ZADD GT did not raise a: %v", s)
	}
	if s := c.ZScore(ctx, "{0}:d", "b").Val(); s != 100 {
		t.Fatalf("ZADD GT lowered b: %v", s)
	}

	// ZRANGE BYSCORE LIMIT WITHSCORES, as Store.Due does.
	zs, err := c.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: "{0}:d", Start: "-inf", Stop: "(10", ByScore: true, Offset: 0, Count: 3,
	}).Result()
	must(err)
	if len(zs) != 3 || zs[0].Member != "m2" || zs[0].Score != 2 || zs[2].Member != "m4" {
		t.Fatalf("ZRANGE BYSCORE LIMIT WITHSCORES: %v", zs)
	}

	must(c.HSet(ctx, "{0}:o", "m2", 5000, "m3", 6000).Err())
	n, err := removeIf.Run(ctx, c, []string{"{0}:d", "{0}:o"}, "m2", 2, "m3", 999, "a", big).Int()
	must(err)
	if n != 2 {
		t.Fatalf("conditional removal removed %d, want 2 (m2 and a)", n)
	}
	if c.HExists(ctx, "{0}:o", "m2").Val() || !c.HExists(ctx, "{0}:o", "m3").Val() {
		t.Fatal("HDEL in script removed the wrong override")
	}
	// ZREMRANGEBYSCORE -inf (5 dropped m3 and m4; m5 stays.
	if c.ZScore(ctx, "{0}:d", "m4").Err() != redis.Nil || c.ZScore(ctx, "{0}:d", "m5").Val() != 5 {
		t.Fatal("ZREMRANGEBYSCORE with an exclusive bound misbehaved")
	}

	ids, err := hashes.Run(ctx, c, []string{"{0}:c"}, 10).Int64Slice()
	must(err)
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 1 {
		t.Fatalf("HINCRBY/HSET/EXISTS via Lua: %v", ids)
	}
	must(c.HSet(ctx, "{0}:c", "next", 10).Err())
	must(c.HDel(ctx, "{0}:c", "n:x").Err())
	err = hashes.Run(ctx, c, []string{"{0}:c"}, 10).Err()
	if err == nil || !strings.Contains(err.Error(), "registry full") {
		t.Fatalf("redis.error_reply: %v", err)
	}

	ok, err := c.SetNX(ctx, "lease", "me", time.Minute).Result()
	must(err)
	if !ok || c.SetNX(ctx, "lease", "you", time.Minute).Val() {
		t.Fatal("SET NX PX")
	}
	if r, err := renew.Run(ctx, c, []string{"lease"}, "me", 120000).Int(); err != nil || r != 1 {
		t.Fatalf("PEXPIRE via Lua: %d, %v", r, err)
	}
	if ttl := c.PTTL(ctx, "lease").Val(); ttl <= time.Minute || ttl > 2*time.Minute {
		t.Fatalf("PTTL after renew: %v", ttl)
	}
	if r, err := renew.Run(ctx, c, []string{"lease"}, "you", 120000).Int(); err != nil || r != 0 {
		t.Fatalf("renew by a non-owner: %d, %v", r, err)
	}

	// go-redis falls back from EVALSHA to EVAL on NOSCRIPT; make sure the
	// EVALSHA path itself is exercised after SCRIPT FLUSH + LOAD.
	must(c.ScriptFlush(ctx).Err())
	must(renew.Load(ctx, c).Err())
	if r, err := renew.EvalSha(ctx, c, []string{"lease"}, "me", 1000).Int(); err != nil || r != 1 {
		t.Fatalf("EVALSHA: %d, %v", r, err)
	}
	must(c.ScriptFlush(ctx).Err())
	if err := renew.EvalSha(ctx, c, []string{"lease"}, "me", 1000).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA of an unknown script: %v, want NOSCRIPT", err)
	}
}
