package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Recovered is a device that was down and whose reset moved it past the
// timeout it had fired, or (Awaited) a parent some children wait for,
// beating again: not a recovery, but its children's own timeouts start
// over from this heartbeat (see ReturnOrphans).
type Recovered struct {
	Shard     int // whose down set remembered it
	ID        string
	DownScore float64
	Awaited   bool
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
//
// Once the writes have landed, the shards that got a deadline their
// scanner's poll may not see in time are announced (see Options.Wakes).
//
// The batch's devices are looked up in their shard's awaited set too
// (lookAwaited): a parent some children wait for is reported back as
// Awaited, so ingest gives them their own timeout from its heartbeat.
//
// With a Durability of Replicas > 0 each pipeline that writes ends in a
// WAIT on its connection (in a cluster: one pipeline per master), and Write
// fails with ErrNotReplicated unless the replicas confirmed it; see
// writeShards. The recoveries a failed Write settled are returned with its
// error.
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
	if b.empty() {
		return nil, nil
	}
	type probe struct {
		shard  int
		exists *redis.IntCmd
		check  *redis.Cmd
	}
	var probes []probe
	var cross []downCheck
	var awaits []awaitLook
	err := s.writeShards(ctx, b.touched, func(p, elsewhere redis.Pipeliner, i int) {
		sb := &b.shards[i]
		if len(sb.reforgets) > 0 {
			scriptForget.EvalSha(ctx, p, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i), s.keys.holds(i)}, sb.reforgets...)
			s.forgetParents(ctx, p, i, sb.reforgets)
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
			cross = append(cross, s.crossChecks(ctx, elsewhere, i, sb)...)
			awaits = s.lookAwaited(ctx, p, i, sb, awaits)
		}
		s.writeKin(ctx, p, i, sb)
		if len(sb.forgets) > 0 {
			scriptForget.EvalSha(ctx, p, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i), s.keys.holds(i)}, sb.forgets...)
			s.forgetParents(ctx, p, i, sb.forgets)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("write deadlines: %w", err)
	}
	s.announce(b)
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
	back, err := s.settle(ctx, b, append(checks, cross...), after)
	return s.awaitedFound(b, awaits, back), err
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

// settle handles what the down-set checks of a written batch found, in
// steps: sort the members found into devices back after their timeout and
// replays (classify); wait for the batch written before, if any; take the
// devices back out of their down sets and remove the replays from the
// deadlines again (resolve); report the recoveries the down-set clears
// confirmed (recoveries).
func (s *Store) settle(ctx context.Context, b *Batch, checks []downCheck, after <-chan struct{}) ([]Recovered, error) {
	all, err := classify(b, checks)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	if after != nil {
		select {
		case <-after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cleared, err := s.resolve(ctx, all)
	if err != nil {
		err = fmt.Errorf("settle recoveries: %w", err)
	}
	// The recoveries a clear reported are returned even when the settling
	// failed elsewhere (a WAIT that did not confirm it, another master):
	// their down entries are gone, so a second attempt would not find them.
	return recoveries(all, cleared), err
}

// downFound is what one down-set check found: the members of shard whose
// device is in downShard's down set.
type downFound struct {
	shard, downShard int
	back             []any // member, down score pairs: later than the timeout fired
	replays          []Member
}

// classify reads the down-set checks of batch b: a member with a down
// score is back when its new score is later, else a replay.
func classify(b *Batch, checks []downCheck) ([]downFound, error) {
	var all []downFound
	for _, c := range checks {
		vals, err := c.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("read down set of shard %d: %w", c.downShard, err)
		}
		sb := &b.shards[c.shard]
		f := downFound{shard: c.shard, downShard: c.downShard}
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
	return all, nil
}

// resolve clears the devices back from their down sets (only the entries
// still the ones read) and removes the replays from their deadlines (only
// if unchanged), in one pipeline per shard: the clears go by the shard
// whose down set it is, the removals by their own. cleared[k] is the clear
// of all[k], nil when it had none.
func (s *Store) resolve(ctx context.Context, all []downFound) (cleared []*redis.Cmd, err error) {
	cleared = make([]*redis.Cmd, len(all))
	queued := make(map[int][]func(redis.Pipeliner))
	var shards []int
	queue := func(i int, q func(redis.Pipeliner)) {
		if queued[i] == nil {
			shards = append(shards, i)
		}
		queued[i] = append(queued[i], q)
	}
	for k, f := range all {
		if len(f.back) > 0 {
			queue(f.downShard, func(p redis.Pipeliner) {
				cleared[k] = scriptDownClr.EvalSha(ctx, p, []string{s.keys.Down(f.downShard)}, f.back...)
			})
		}
		if len(f.replays) > 0 {
			args := make([]any, 0, 2*len(f.replays))
			for _, m := range f.replays {
				args = append(args, m.ID, m.Score)
			}
			queue(f.shard, func(p redis.Pipeliner) {
				scriptRemoveIf.EvalSha(ctx, p, []string{s.keys.Deadlines(f.shard), s.keys.Overrides(f.shard)}, args...)
			})
		}
	}
	err = s.writeShards(ctx, shards, func(p, _ redis.Pipeliner, i int) {
		for _, q := range queued[i] {
			q(p)
		}
	})
	return cleared, err
}

// recoveries are the devices the clears of resolve took out of a down set,
// each once: a device found in both its shards' down sets (MoveDown under
// way) recovered once.
func recoveries(all []downFound, cleared []*redis.Cmd) []Recovered {
	var back []Recovered
	seen := make(map[string]bool)
	for k, f := range all {
		if cleared[k] == nil || cleared[k].Err() != nil {
			continue
		}
		vals, _ := cleared[k].Slice()
		for j := 0; j+1 < len(vals); j += 2 {
			id, _ := vals[j].(string)
			if seen[id] {
				continue
			}
			seen[id] = true
			ds, _ := vals[j+1].(string)
			score, _ := strconv.ParseFloat(ds, 64)
			back = append(back, Recovered{Shard: f.downShard, ID: id, DownScore: score})
		}
	}
	return back
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
