package shard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *redis.Script {
	src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("shard: missing script %s: %v", name, err))
	}
	return redis.NewScript(string(src))
}

var (
	scriptDownClr  = loadScript("down_clear")
	scriptFired    = loadScript("fired")
	scriptRemoveIf = loadScript("remove_if")
	scriptForget   = loadScript("forget")
	scriptWMRaise  = loadScript("watermark_raise")
	scriptClasses  = loadScript("classes_register")
	scriptRenew    = loadScript("lease_renew")
	scriptRelease  = loadScript("lease_release")
	scriptLayout   = loadScript("layout_set")
	allScripts     = []*redis.Script{scriptDownClr, scriptFired, scriptRemoveIf, scriptForget,
		scriptWMRaise, scriptClasses, scriptRenew, scriptRelease, scriptLayout}
)

// ErrLayoutChanged is returned by SetLayout when the stored layout is no
// longer the one the caller read.
var ErrLayoutChanged = errors.New("layout changed meanwhile")

// Store is flatline's Redis store. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	// downs remembers per shard whether its down set existed at its last
	// write (see Write).
	downs [MaxShards]atomic.Bool
}

// NewStore returns a store over rdb using keys.
func NewStore(rdb redis.UniversalClient, keys Keys) *Store {
	return &Store{rdb: rdb, keys: keys}
}

// Client is the underlying Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Keys is the key builder.
func (s *Store) Keys() Keys { return s.keys }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// LoadScripts loads every script into the script cache of Redis (every
// master, in a cluster), so pipelines can use EVALSHA.
func (s *Store) LoadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c *redis.Client) error {
		for _, sc := range allScripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, load)
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load scripts: %w", err)
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// pipelined runs fill in a pipeline and, when Redis lost its script cache
// (a restart or failover), reloads the scripts and runs once more the calls
// that met NOSCRIPT. Only those: in a cluster the other masters' calls
// already ran, and running them again would lose what they reported (a
// recovery is reported by the call that ends it, once).
func (s *Store) pipelined(ctx context.Context, fill func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	cmds, err := s.rdb.Pipelined(ctx, fill)
	if !isNoScript(err) {
		return cmds, err
	}
	if lerr := s.LoadScripts(ctx); lerr != nil {
		return nil, lerr
	}
	var again []redis.Cmder
	for _, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, c)
		}
	}
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range again {
			_ = p.Process(ctx, c)
		}
		return nil
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// readErr is the error of a pipeline of reads, where redis.Nil ("no such
// key or member") is an answer, not a failure. Pipelined reports only the
// first failed command, and a redis.Nil ahead of a command that failed (in a
// cluster: its master is down) would hide the failure.
func readErr(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			return cerr
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Member is a device in a shard's deadlines set with its score.
type Member struct {
	ID    string
	Score float64
}

// Recovered is a device that was down and whose reset moved it past the
// timeout it had fired.
type Recovered struct {
	Shard     int // whose down set remembered it
	ID        string
	DownScore float64
}

// Write applies b in one pipelined round trip of plain commands: per
// touched shard a variadic ZADD GT (and an HSET of override timeouts), then
// a look at the shard's down set. It reports the devices that came back from
// a timeout.
//
// No script guards the ZADD: a heartbeat older than a timeout its device
// already fired (a replay) is written like any other, found in the down set
// right after, and removed again (RemoveIf); until then the scanner, which
// checks the down set before it fires (DownScores), drops it. A device whose
// new deadline is later than the timeout it fired has recovered: its down
// entry is removed (only if still that one) and it is reported.
//
// The down-set look is a ZMSCORE of the batch's members in the same round
// trip when the shard's down set was there at its last write, else an
// EXISTS, followed by the ZMSCORE only if the set turned up meanwhile: a
// fleet without silent devices pays for neither.
func (s *Store) Write(ctx context.Context, b *Batch) ([]Recovered, error) {
	return s.WriteAfter(ctx, b, nil)
}

// WriteAfter is Write for a batch written side by side with the one before
// it: its writes may reach Redis first (a ZADD GT commutes), but what its
// look at the down sets found is settled only once after is closed (the
// other batch is done), so recoveries and replays are settled in batch
// order, as if the batches had been written one after the other. A nil
// after does not wait.
func (s *Store) WriteAfter(ctx context.Context, b *Batch, after <-chan struct{}) ([]Recovered, error) {
	if b.Empty() {
		return nil, nil
	}
	type probe struct {
		shard  int
		exists *redis.IntCmd
		check  *redis.Cmd
	}
	var probes []probe
	var cross []downCheck
	_, err := s.pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range b.touched {
			sb := &b.shards[i]
			if len(sb.reforgets) > 0 {
				scriptForget.EvalSha(ctx, p, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i)}, sb.reforgets...)
			}
			if sb.n > 0 {
				sb.zadd[0], sb.zadd[1], sb.zadd[2] = "zadd", s.keys.Deadlines(i), "gt"
				p.Do(ctx, sb.zadd...)
				if len(sb.hset) > 0 {
					sb.hset[0], sb.hset[1] = "hset", s.keys.Overrides(i)
					p.Do(ctx, sb.hset...)
				}
				pr := probe{shard: i, exists: p.Exists(ctx, s.keys.Down(i))}
				if s.downs[i].Load() {
					pr.check = p.Do(ctx, sb.checkArgs(s.keys.Down(i))...)
				}
				probes = append(probes, pr)
				cross = append(cross, s.crossChecks(ctx, p, i, sb)...)
			}
			if len(sb.forgets) > 0 {
				scriptForget.EvalSha(ctx, p, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i)}, sb.forgets...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write deadlines: %w", err)
	}
	// Down sets that turned up since the last write of their shard.
	var late []int
	for k := range probes {
		pr := &probes[k]
		there := pr.exists.Val() > 0
		s.downs[pr.shard].Store(there)
		if there && pr.check == nil {
			late = append(late, k)
		}
	}
	if len(late) > 0 {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range late {
				i := probes[k].shard
				probes[k].check = p.Do(ctx, b.shards[i].checkArgs(s.keys.Down(i))...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read down sets: %w", err)
		}
	}
	checks := make([]downCheck, 0, len(probes)+len(cross))
	for _, pr := range probes {
		if pr.check != nil {
			checks = append(checks, downCheck{shard: pr.shard, downShard: pr.shard, cmd: pr.check})
		}
	}
	return s.settle(ctx, b, append(checks, cross...), after)
}

// downCheck is a ZMSCORE of members a batch wrote to shard in the down set
// of downShard: their own shard's, or while the layout migrates the one of
// the shard they had under the previous count.
type downCheck struct {
	shard, downShard int
	refs             []int // the members' positions in the shard batch; nil: all, in order
	cmd              *redis.Cmd
}

// crossChecks queues, for the pairs of sb whose device had another shard
// under the migrating layout's previous count, a ZMSCORE of the down set of
// that shard: a device that timed out there and is back now, or a replay of
// it, is found although its down entry is not in shard i.
func (s *Store) crossChecks(ctx context.Context, p redis.Pipeliner, i int, sb *shardBatch) []downCheck {
	if len(sb.moved) == 0 {
		return nil
	}
	byPrev := make(map[int][]int)
	for _, m := range sb.moved {
		byPrev[m.prev] = append(byPrev[m.prev], m.k)
	}
	out := make([]downCheck, 0, len(byPrev))
	for prev, refs := range byPrev {
		args := make([]any, 0, 2+len(refs))
		args = append(args, "zmscore", s.keys.Down(prev))
		for _, k := range refs {
			args = append(args, sb.ids[k])
		}
		out = append(out, downCheck{shard: i, downShard: prev, refs: refs, cmd: p.Do(ctx, args...)})
	}
	return out
}

// settle handles what the down-set checks of a written batch found: devices
// back after their timeout leave the down set and are reported; replays are
// removed from the deadlines again.
func (s *Store) settle(ctx context.Context, b *Batch, checks []downCheck, after <-chan struct{}) ([]Recovered, error) {
	type found struct {
		shard, downShard int
		back             []any // member, down score pairs
		replays          []Member
	}
	var all []found
	for _, c := range checks {
		vals, err := c.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("read down set of shard %d: %w", c.downShard, err)
		}
		sb := &b.shards[c.shard]
		f := found{shard: c.shard, downShard: c.downShard}
		for j, v := range vals {
			k := j
			if c.refs != nil {
				k = c.refs[j]
			}
			var down float64
			switch v := v.(type) {
			case float64: // RESP3
				down = v
			case string: // RESP2
				down, _ = strconv.ParseFloat(v, 64)
			default:
				continue // not down
			}
			score := float64(sb.scores[k])
			id := sb.ids[k]
			if score > down {
				f.back = append(f.back, id, down)
			} else {
				f.replays = append(f.replays, Member{ID: id, Score: score})
			}
		}
		if len(f.back) > 0 || len(f.replays) > 0 {
			all = append(all, f)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	if after != nil {
		select {
		case <-after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cleared := make([]*redis.Cmd, len(all))
	_, err := s.pipelined(ctx, func(p redis.Pipeliner) error {
		for k, f := range all {
			if len(f.back) > 0 {
				cleared[k] = scriptDownClr.EvalSha(ctx, p, []string{s.keys.Down(f.downShard)}, f.back...)
			}
			if len(f.replays) > 0 {
				args := make([]any, 0, 2*len(f.replays))
				for _, m := range f.replays {
					args = append(args, m.ID, m.Score)
				}
				scriptRemoveIf.EvalSha(ctx, p, []string{s.keys.Deadlines(f.shard), s.keys.Overrides(f.shard)}, args...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("settle recoveries: %w", err)
	}
	var back []Recovered
	seen := make(map[string]bool)
	for k, f := range all {
		if cleared[k] == nil {
			continue
		}
		vals, _ := cleared[k].Slice()
		for j := 0; j+1 < len(vals); j += 2 {
			id, _ := vals[j].(string)
			if seen[id] {
				continue // found in both its shards' down sets (MoveDown under way): one recovery
			}
			seen[id] = true
			ds, _ := vals[j+1].(string)
			score, _ := strconv.ParseFloat(ds, 64)
			back = append(back, Recovered{Shard: f.downShard, ID: id, DownScore: score})
		}
	}
	return back, nil
}

// checkArgs is the ZMSCORE of sb's members in down set key.
func (sb *shardBatch) checkArgs(key string) []any {
	if len(sb.check) == 0 {
		sb.check = append(sb.check, "zmscore", key)
		for k := zaddHead + 1; k < len(sb.zadd); k += 2 {
			sb.check = append(sb.check, sb.zadd[k])
		}
	}
	return sb.check
}

// DownScores returns, for each of ids, the score of the timeout it fired in
// shard i, or 0 when it is not remembered as down.
func (s *Store) DownScores(ctx context.Context, i int, ids []string) ([]float64, error) {
	vals, err := s.rdb.ZMScore(ctx, s.keys.Down(i), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read down set of shard %d: %w", i, err)
	}
	return vals, nil
}

// Due returns up to limit members of shard i with score ≤ max, skipping the
// first offset of them, earliest first.
func (s *Store) Due(ctx context.Context, i int, max float64, offset, limit int) ([]Member, error) {
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: s.keys.Deadlines(i), Start: "-inf", Stop: strconv.FormatFloat(max, 'f', -1, 64),
		ByScore: true, Offset: int64(offset), Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("scan shard %d: %w", i, err)
	}
	out := make([]Member, len(zs))
	for k, z := range zs {
		out[k] = Member{ID: z.Member.(string), Score: z.Score}
	}
	return out, nil
}

// DueWindows reads k consecutive windows of shard i by rank in one round
// trip: window j holds the members at ranks offset + j·stride … offset +
// j·stride + size − 1, earliest first. A scanner that keeps finding full
// pops reads several pops ahead this way, each still its own ZRANGE. By
// rank, not by score: Redis finds a rank in O(log n), while a score range
// walks its offset member by member, and the scanner skips the members it
// has in flight, thousands of them during a mass expiry.
func (s *Store) DueWindows(ctx context.Context, i, offset, stride, size, k int) ([][]Member, error) {
	key := s.keys.Deadlines(i)
	cmds := make([]*redis.ZSliceCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j := range cmds {
			start := int64(offset + j*stride)
			cmds[j] = p.ZRangeWithScores(ctx, key, start, start+int64(size)-1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan shard %d: %w", i, err)
	}
	out := make([][]Member, k)
	for j, c := range cmds {
		zs := c.Val()
		out[j] = make([]Member, len(zs))
		for n, z := range zs {
			out[j][n] = Member{ID: z.Member.(string), Score: z.Score}
		}
	}
	return out, nil
}

// Next returns the earliest member of shard i, if any.
func (s *Store) Next(ctx context.Context, i int) (Member, bool, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Deadlines(i), 0, 0).Result()
	if err != nil {
		return Member{}, false, fmt.Errorf("peek shard %d: %w", i, err)
	}
	if len(zs) == 0 {
		return Member{}, false, nil
	}
	return Member{ID: zs[0].Member.(string), Score: zs[0].Score}, true, nil
}

// OverridesOf returns the per-device timeouts (ms) of those of ms in shard i
// whose score says they have one (FlagOverride): nil, without a round trip,
// when none does.
func (s *Store) OverridesOf(ctx context.Context, i int, ms []Member) (map[string]int64, error) {
	var ids []string
	for _, m := range ms {
		if _, meta := Decode(m.Score); meta.Has(FlagOverride) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.Overrides(ctx, i, ids)
}

// Overrides returns the per-device timeouts (ms) of ids in shard i that
// have one.
func (s *Store) Overrides(ctx context.Context, i int, ids []string) (map[string]int64, error) {
	vals, err := s.rdb.HMGet(ctx, s.keys.Overrides(i), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read overrides of shard %d: %w", i, err)
	}
	out := make(map[string]int64, len(ids))
	for k, v := range vals {
		if str, ok := v.(string); ok {
			if ms, err := strconv.ParseInt(str, 10, 64); err == nil {
				out[ids[k]] = ms
			}
		}
	}
	return out, nil
}

// Raced is a member whose timeout was published while a reset moved it
// on: its device beat again after the deadline it fired at.
type Raced struct {
	ID string
	// FiredScore is the score the timeout fired at; Score the current one.
	FiredScore, Score float64
}

// Fired removes the members whose timeouts were acknowledged, each only if
// its score is unchanged, remembers them as down, and prunes down entries
// scored below pruneBelow. It returns how many left, and the members a
// reset moved on meanwhile (kept, not remembered as down): their recovery
// is the caller's to report, since the reset ran before any down entry.
func (s *Store) Fired(ctx context.Context, i int, ms []Member, pruneBelow float64) (int, []Raced, error) {
	args := make([]any, 1+2*len(ms))
	args[0] = strconv.FormatFloat(pruneBelow, 'f', -1, 64)
	for k, m := range ms {
		args[1+k] = m.ID
		args[1+len(ms)+k] = int64(m.Score) // whole numbers (see Score)
	}
	vals, err := scriptFired.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i)}, args...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("remove fired from shard %d: %w", i, err)
	}
	if len(vals) == 0 {
		return 0, nil, fmt.Errorf("remove fired from shard %d: empty answer", i)
	}
	removed, _ := vals[0].(int64)
	var raced []Raced
	if len(vals) > 1 {
		fired := make(map[string]float64, len(ms))
		for _, m := range ms {
			fired[m.ID] = m.Score
		}
		for k := 1; k+1 < len(vals); k += 2 {
			id, _ := vals[k].(string)
			cur, _ := vals[k+1].(string)
			score, _ := strconv.ParseFloat(cur, 64)
			raced = append(raced, Raced{ID: id, FiredScore: fired[id], Score: score})
		}
	}
	return int(removed), raced, nil
}

// RemoveIf removes members of shard i whose score is unchanged and returns
// those removed with their override timeout (0 when none).
func (s *Store) RemoveIf(ctx context.Context, i int, ms []Member) (map[string]int64, error) {
	args := make([]any, 0, 2*len(ms))
	for _, m := range ms {
		args = append(args, m.ID, m.Score)
	}
	vals, err := scriptRemoveIf.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Overrides(i)}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("remove from shard %d: %w", i, err)
	}
	out := make(map[string]int64, len(vals)/2)
	for k := 0; k+1 < len(vals); k += 2 {
		id, _ := vals[k].(string)
		o, _ := vals[k+1].(string)
		ms, _ := strconv.ParseInt(o, 10, 64)
		out[id] = ms
	}
	return out, nil
}

// Score returns the score of device id in shard i, if tracked there.
func (s *Store) Score(ctx context.Context, i int, id string) (float64, bool, error) {
	v, err := s.rdb.ZScore(ctx, s.keys.Deadlines(i), id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read score in shard %d: %w", i, err)
	}
	return v, true, nil
}

// DownScore returns the score of the timeout device id fired in shard i, if
// it is remembered as down.
func (s *Store) DownScore(ctx context.Context, i int, id string) (float64, bool, error) {
	v, err := s.rdb.ZScore(ctx, s.keys.Down(i), id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read down state in shard %d: %w", i, err)
	}
	return v, true, nil
}

// Sizes returns the number of members of shards 0..n-1 in one round trip.
func (s *Store) Sizes(ctx context.Context, n int) ([]int64, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.ZCard(ctx, s.keys.Deadlines(i))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read shard sizes: %w", err)
	}
	out := make([]int64, n)
	for i, c := range cmds {
		out[i] = c.(*redis.IntCmd).Val()
	}
	return out, nil
}

// Layout reads the stored layout; ok is false when none was stored yet.
func (s *Store) Layout(ctx context.Context) (l Layout, ok bool, err error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Layout()).Result()
	if err != nil {
		return Layout{}, false, fmt.Errorf("read layout: %w", err)
	}
	if len(m) == 0 {
		return Layout{}, false, nil
	}
	l.Count, _ = strconv.Atoi(m["count"])
	l.Previous, _ = strconv.Atoi(m["previous"])
	l.Epoch, _ = strconv.ParseInt(m["epoch"], 10, 64)
	l.SinceMs, _ = strconv.ParseInt(m["since_ms"], 10, 64)
	if !ValidCount(l.Count) {
		return Layout{}, false, fmt.Errorf("stored layout has invalid count %q", m["count"])
	}
	return l, true, nil
}

// SetLayout stores l if the stored epoch is still readEpoch (0: none yet),
// and returns l with its new epoch; ErrLayoutChanged otherwise.
func (s *Store) SetLayout(ctx context.Context, readEpoch int64, l Layout) (Layout, error) {
	epoch, err := scriptLayout.Run(ctx, s.rdb, []string{s.keys.Layout()},
		readEpoch, l.Count, l.Previous, l.SinceMs).Int64()
	if err != nil {
		return Layout{}, fmt.Errorf("write layout: %w", err)
	}
	if epoch == 0 {
		return Layout{}, ErrLayoutChanged
	}
	l.Epoch = epoch
	return l, nil
}

// RaiseWatermarks moves the watermarks of the given partitions forward
// (never back) and records the partition count when partitions > 0.
func (s *Store) RaiseWatermarks(ctx context.Context, partitions int, wm map[int]int64) error {
	if len(wm) == 0 && partitions == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*len(wm))
	args = append(args, partitions)
	for p, ms := range wm {
		args = append(args, p, ms)
	}
	if err := scriptWMRaise.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, args...).Err(); err != nil {
		return fmt.Errorf("raise watermarks: %w", err)
	}
	return nil
}

// Watermarks returns wm(p) for every partition that has one and the
// partition count ingest recorded (0 if none yet).
func (s *Store) Watermarks(ctx context.Context) (map[int]int64, int, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Watermarks()).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("read watermarks: %w", err)
	}
	out := make(map[int]int64, len(m))
	n := 0
	for k, v := range m {
		ms, _ := strconv.ParseInt(v, 10, 64)
		if k == "partitions" {
			n = int(ms)
			continue
		}
		p, err := strconv.Atoi(k)
		if err == nil {
			out[p] = ms
		}
	}
	return out, n, nil
}

// RegisterClasses returns the stable ids of the named classes, assigning
// new ones to classes seen for the first time.
func (s *Store) RegisterClasses(ctx context.Context, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+len(names))
	args = append(args, MaxClassID)
	for _, n := range names {
		args = append(args, n)
	}
	ids, err := scriptClasses.Run(ctx, s.rdb, []string{s.keys.Classes()}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("register classes: %w", err)
	}
	out := make([]int, len(ids))
	for k, id := range ids {
		out[k] = int(id)
	}
	return out, nil
}

// ClassNames returns the registry: class id -> name.
func (s *Store) ClassNames(ctx context.Context) (map[int]string, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Classes()).Result()
	if err != nil {
		return nil, fmt.Errorf("read classes: %w", err)
	}
	out := make(map[int]string)
	for k, v := range m {
		if idStr, ok := strings.CutPrefix(k, "i:"); ok {
			if id, err := strconv.Atoi(idStr); err == nil {
				out[id] = v
			}
		}
	}
	return out, nil
}

// AcquireLease takes shard i's lease for owner if nobody holds it.
func (s *Store) AcquireLease(ctx context.Context, i int, owner string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.keys.Lease(i), owner, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("acquire lease of shard %d: %w", i, err)
	}
	return ok, nil
}

// RenewLease extends shard i's lease if owner holds it.
func (s *Store) RenewLease(ctx context.Context, i int, owner string, ttl time.Duration) (bool, error) {
	n, err := scriptRenew.Run(ctx, s.rdb, []string{s.keys.Lease(i)}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew lease of shard %d: %w", i, err)
	}
	return n == 1, nil
}

// ReleaseLease drops shard i's lease if owner holds it.
func (s *Store) ReleaseLease(ctx context.Context, i int, owner string) error {
	if err := scriptRelease.Run(ctx, s.rdb, []string{s.keys.Lease(i)}, owner).Err(); err != nil {
		return fmt.Errorf("release lease of shard %d: %w", i, err)
	}
	return nil
}

// LeaseOwners returns the owner of each of shards 0..n-1 ("" when free).
func (s *Store) LeaseOwners(ctx context.Context, n int) ([]string, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.Get(ctx, s.keys.Lease(i))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	out := make([]string, n)
	for i, c := range cmds {
		out[i] = c.(*redis.StringCmd).Val()
	}
	return out, nil
}

// Heartbeat registers instance id as alive at nowMs and drops instances not
// heard from since staleBeforeMs. It returns the live instances, sorted.
func (s *Store) Heartbeat(ctx context.Context, id string, nowMs, staleBeforeMs int64) ([]string, error) {
	key := s.keys.Instances()
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(nowMs), Member: id})
		p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(staleBeforeMs, 10))
		p.ZRange(ctx, key, 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register instance: %w", err)
	}
	live := cmds[2].(*redis.StringSliceCmd).Val()
	return live, nil
}

// Deregister removes instance id from the live set.
func (s *Store) Deregister(ctx context.Context, id string) error {
	return s.rdb.ZRem(ctx, s.keys.Instances(), id).Err()
}

// Instances returns the registered live instances.
func (s *Store) Instances(ctx context.Context) ([]string, error) {
	return s.rdb.ZRange(ctx, s.keys.Instances(), 0, -1).Result()
}
