package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// kinHead is the head of a shard batch's parent commands: command, key.
const kinHead = 2

// ParentField is device id's field in its shard's parents HASH: the top
// 48 bits of its routing hash, six bytes, not its id. A child then costs
// its parent's id and a hash entry's overhead (at most 62 B: six bytes and
// their header fit jemalloc's 8-byte class), however long its own id is.
// The shard is chosen by the hash's low bits, so the top 48 tell a shard's
// devices apart: two of them sharing a parent entry takes about 2^24
// children in one shard for even odds of one pair.
func ParentField(id string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], Hash(id))
	return string(b[:6])
}

// parentFields are the ParentFields of ids.
func parentFields(ids []string) []string {
	out := make([]string, len(ids))
	for k, id := range ids {
		out[k] = ParentField(id)
	}
	return out
}

// SetParent records a parent change of device id, in shard i: parent, in
// shard pi, is its gateway now; "" removes it. Ingest calls it only when a
// device's parent changed, so a fleet without parents sends nothing more.
func (b *Batch) SetParent(i int, id, parent string, pi int) {
	sb := b.shard(i)
	if parent == "" {
		if len(sb.unparents) == 0 {
			sb.unparents = append(sb.unparents, nil, nil)
		}
		sb.unparents = append(sb.unparents, ParentField(id))
		return
	}
	if len(sb.parents) == 0 {
		sb.parents = append(sb.parents, nil, nil)
	}
	sb.parents = append(sb.parents, ParentField(id), parent)
	if _, ok := b.gateways[parent]; ok {
		return
	}
	if b.gateways == nil {
		b.gateways = make(map[string]struct{})
	}
	b.gateways[parent] = struct{}{}
	pb := b.shard(pi)
	if len(pb.named) == 0 {
		pb.named = append(pb.named, nil, nil)
	}
	pb.named = append(pb.named, parent)
}

// forgetParents queues the removal of the parents of devices ids (a
// tombstone) of shard i in p.
func (s *Store) forgetParents(ctx context.Context, p redis.Pipeliner, i int, ids []any) {
	args := make([]any, 0, 2+len(ids))
	args = append(args, "hdel", s.keys.Parents(i))
	for _, id := range ids {
		args = append(args, ParentField(id.(string)))
	}
	p.Do(ctx, args...)
}

// writeKin queues shard i's parent changes of the batch in p.
func (s *Store) writeKin(ctx context.Context, p redis.Pipeliner, i int, sb *shardBatch) {
	if len(sb.parents) > 0 {
		sb.parents[0], sb.parents[1] = "hset", s.keys.Parents(i)
		p.Do(ctx, sb.parents...)
	}
	if len(sb.unparents) > 0 {
		sb.unparents[0], sb.unparents[1] = "hdel", s.keys.Parents(i)
		p.Do(ctx, sb.unparents...)
	}
	if len(sb.named) > 0 {
		sb.named[0], sb.named[1] = "sadd", s.keys.gateways(i)
		p.Do(ctx, sb.named...)
	}
}

// Wait is a child's hold (see Keys.holds): re-entered at score At to wait
// for its parent, its deadline was Orig's.
type Wait struct {
	Orig, At float64
}

// Kin is what the firing of a device needs to know of its family.
type Kin struct {
	// Parent is the device's gateway, "" when it has none.
	Parent string
	// Named says some child named the device as its parent.
	Named bool
	// Wait is the device's hold, if it has one (Held).
	Wait Wait
	Held bool
}

// KinKeys names a shard's family keys: its parents HASH, its gateways SET
// and its holds HASH.
type KinKeys struct {
	Parents, Gateways, Holds bool
}

// ParentReads are parents to read: IDs[k] in Shards[k] (see ParentStates).
type ParentReads struct {
	IDs    []string
	Shards [][]int
}

// KinOf returns the kin of members ms of shard i, in one round trip,
// reading only the keys read names (a key known to be absent is not read):
// which of them exist comes back in exist. While the layout migrates,
// other[k] (when ≥ 0 and not i) is the other shard of ms[k], where its
// parent and gateway entries may still be. any says some member has kin.
// The states of parents guess come back in guessed, read in the same
// round trip after the kin (as ParentStates would after it): a caller
// that guesses the members' parents right needs no second one.
func (s *Store) KinOf(ctx context.Context, i int, ms []Member, other []int, read KinKeys, guess ParentReads) (kin []Kin, any bool, exist KinKeys, guessed []ParentState, err error) {
	ids := make([]string, len(ms))
	for k, m := range ms {
		ids[k] = m.ID
	}
	var parents, holds *redis.SliceCmd
	var named *redis.BoolSliceCmd
	var elsewhere []*redis.StringCmd
	var namedElsewhere []*redis.BoolCmd
	var exists [3]*redis.IntCmd
	var states func() []ParentState
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = [3]*redis.IntCmd{p.Exists(ctx, s.keys.Parents(i)), p.Exists(ctx, s.keys.gateways(i)), p.Exists(ctx, s.keys.holds(i))}
		if read.Parents {
			parents = p.HMGet(ctx, s.keys.Parents(i), parentFields(ids)...)
		}
		if read.Gateways {
			named = p.SMIsMember(ctx, s.keys.gateways(i), toAny(ids)...)
		}
		if read.Holds {
			holds = p.HMGet(ctx, s.keys.holds(i), ids...)
		}
		for k := range other {
			if o := other[k]; o >= 0 && o != i {
				elsewhere = append(elsewhere, p.HGet(ctx, s.keys.Parents(o), ParentField(ids[k])))
				namedElsewhere = append(namedElsewhere, p.SIsMember(ctx, s.keys.gateways(o), ids[k]))
			} else {
				elsewhere, namedElsewhere = append(elsewhere, nil), append(namedElsewhere, nil)
			}
		}
		states = s.queueParentReads(ctx, p, guess)
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, false, KinKeys{}, nil, fmt.Errorf("read kin in shard %d: %w", i, err)
	}
	kin = make([]Kin, len(ms))
	for k := range ms {
		kn := &kin[k]
		if parents != nil {
			kn.Parent, _ = parents.Val()[k].(string)
		}
		kn.Named = named != nil && named.Val()[k]
		if k < len(elsewhere) && elsewhere[k] != nil {
			if kn.Parent == "" {
				kn.Parent = elsewhere[k].Val()
			}
			kn.Named = kn.Named || namedElsewhere[k].Val()
		}
		if holds != nil {
			if h, ok := holds.Val()[k].(string); ok {
				kn.Wait, kn.Held = parseWait(h)
			}
		}
		any = any || kn.Parent != "" || kn.Named || kn.Held
	}
	exist = KinKeys{Parents: exists[0].Val() > 0, Gateways: exists[1].Val() > 0, Holds: exists[2].Val() > 0}
	return kin, any, exist, states(), nil
}

func toAny(ids []string) []any {
	out := make([]any, len(ids))
	for k, id := range ids {
		out[k] = id
	}
	return out
}

func parseWait(v string) (Wait, bool) {
	a, b, ok := strings.Cut(v, ":")
	if !ok {
		return Wait{}, false
	}
	orig, err1 := strconv.ParseFloat(a, 64)
	at, err2 := strconv.ParseFloat(b, 64)
	return Wait{Orig: orig, At: at}, err1 == nil && err2 == nil
}

func formatWait(h Wait) string {
	return strconv.FormatInt(int64(h.Orig), 10) + ":" + strconv.FormatInt(int64(h.At), 10)
}

// ParentState is what the shards hold of a parent: its live deadline score
// (and its override timeout, 0 when none) and the score of a timeout it
// fired.
type ParentState struct {
	Live, Down       float64
	HasLive, HasDown bool
	Override         int64
	// Wait is the parent's own hold, when it is held for its parent (a
	// chain: a gateway behind a router): its live score is then the hold's,
	// not a deadline from a heartbeat.
	Wait   Wait
	Waited bool
}

// ParentStates returns what shards[k] (the parent's shard, and while the
// layout migrates its other one) hold of parent ids[k], in one round trip:
// the later live copy and the later down entry. A parent's shard may be
// another Redis Cluster node than its child's: plain commands, no script.
func (s *Store) ParentStates(ctx context.Context, ids []string, shards [][]int) ([]ParentState, error) {
	var states func() []ParentState
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		states = s.queueParentReads(ctx, p, ParentReads{IDs: ids, Shards: shards})
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("read parents: %w", err)
	}
	return states(), nil
}

// queueParentReads queues the reads of parents r on p; once p ran, the
// returned function gives their states (nil for no parents).
func (s *Store) queueParentReads(ctx context.Context, p redis.Pipeliner, r ParentReads) func() []ParentState {
	if len(r.IDs) == 0 {
		return func() []ParentState { return nil }
	}
	reads := make([][]parentRead, len(r.IDs))
	for k, id := range r.IDs {
		for _, i := range r.Shards[k] {
			reads[k] = append(reads[k], parentRead{p.ZScore(ctx, s.keys.Deadlines(i), id),
				p.ZScore(ctx, s.keys.Down(i), id), p.HGet(ctx, s.keys.Overrides(i), id), p.HGet(ctx, s.keys.holds(i), id)})
		}
	}
	return func() []ParentState { return parentStates(reads) }
}

// parentRead is what one shard holds of a parent.
type parentRead struct {
	live, down  *redis.FloatCmd
	over, waits *redis.StringCmd
}

// parentStates is the later live copy and the later down entry of each
// parent's reads.
func parentStates(reads [][]parentRead) []ParentState {
	out := make([]ParentState, len(reads))
	for k := range reads {
		st := &out[k]
		for _, r := range reads[k] {
			if v, err := r.live.Result(); err == nil && (!st.HasLive || v > st.Live) {
				st.Live, st.HasLive = v, true
				st.Override, _ = strconv.ParseInt(r.over.Val(), 10, 64)
				w, ok := parseWait(r.waits.Val())
				st.Wait, st.Waited = w, ok && w.At == v
			}
			if v, err := r.down.Result(); err == nil && (!st.HasDown || v > st.Down) {
				st.Down, st.HasDown = v, true
			}
		}
	}
	return out
}

// Rescore gives members of shard i a new score, each only if its score is
// unchanged (a heartbeat that came meanwhile moved it on, ZADD GT, and it
// stays as it is), and sets or ends their hold: holds[k] nil ends the
// member's hold, else it is held. It returns which members it changed.
func (s *Store) Rescore(ctx context.Context, i int, ms []Member, to []float64, holds []*Wait) ([]bool, error) {
	args := make([]any, 0, 4*len(ms))
	for k, m := range ms {
		h := ""
		if holds[k] != nil {
			h = formatWait(*holds[k])
		}
		args = append(args, m.ID, int64(m.Score), int64(to[k]), h)
	}
	vals, err := scriptRescore.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.holds(i)}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("rescore in shard %d: %w", i, err)
	}
	out := make([]bool, len(ms))
	for k := range out {
		out[k] = k < len(vals) && vals[k] == 1
	}
	return out, nil
}

// AddOrphans remembers, per parent, children held or reported unreachable
// while it is silent, with their timeouts (ms), for ttl after the last
// child added: a parent that never comes back leaves nothing behind once
// its return could no longer be told (its down entry pruned).
func (s *Store) AddOrphans(ctx context.Context, byParent map[string][]any, ttl time.Duration) error {
	if len(byParent) == 0 {
		return nil
	}
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for parent, pairs := range byParent {
			p.HSet(ctx, s.keys.orphans(parent), pairs...)
			p.PExpire(ctx, s.keys.orphans(parent), ttl)
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return fmt.Errorf("remember orphans: %w", err)
	}
	return nil
}

// DropOrphans forgets children no longer waiting for their parent.
func (s *Store) DropOrphans(ctx context.Context, byParent map[string][]string) error {
	if len(byParent) == 0 {
		return nil
	}
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for parent, ids := range byParent {
			p.HDel(ctx, s.keys.orphans(parent), ids...)
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return fmt.Errorf("forget orphans: %w", err)
	}
	return nil
}

// ChildrenHeld returns how many children wait for each of parents.
func (s *Store) ChildrenHeld(ctx context.Context, parents []string) ([]int64, error) {
	out := make([]int64, len(parents))
	if len(parents) == 0 {
		return out, nil
	}
	lens := make([]*redis.IntCmd, len(parents))
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, parent := range parents {
			lens[k] = p.HLen(ctx, s.keys.orphans(parent))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("count held children: %w", err)
	}
	for k, c := range lens {
		out[k] = c.Val()
	}
	return out, nil
}

// Orphan is a child waiting for its parent, with its timeout (ms).
type Orphan struct {
	ID        string
	TimeoutMs int64
}

// Orphans returns the children waiting for parent.
func (s *Store) Orphans(ctx context.Context, parent string) ([]Orphan, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.orphans(parent)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read orphans of %s: %w", parent, err)
	}
	out := make([]Orphan, 0, len(m))
	for id, v := range m {
		ms, _ := strconv.ParseInt(v, 10, 64)
		out = append(out, Orphan{ID: id, TimeoutMs: ms})
	}
	return out, nil
}

// IsOrphan reports whether child waits for parent (held or unreachable).
func (s *Store) IsOrphan(ctx context.Context, parent, child string) (bool, error) {
	ok, err := s.rdb.HExists(ctx, s.keys.orphans(parent), child).Result()
	if err != nil {
		return false, fmt.Errorf("read orphans of %s: %w", parent, err)
	}
	return ok, nil
}

// Return is a device back after its timeout at SeenAtMs: a parent whose
// orphans get their own timeout again from then.
type Return struct {
	ID       string
	SeenAtMs int64
}

// ReturnOrphans gives the children waiting for a parent of back (held for
// it, or reported unreachable while it was down) their own timeout again
// from the parent's return (see orphan_return.lua; a child that already
// beat again is left as it is), then forgets them all and the parent's
// awaited mark, in two round trips. A child is looked for in its home
// shard under l, and while l migrates in its previous one too.
func (s *Store) ReturnOrphans(ctx context.Context, l Layout, back []Return) (int, error) {
	if len(back) == 0 {
		return 0, nil
	}
	all := make([]*redis.MapStringStringCmd, len(back))
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, r := range back {
			all[k] = p.HGetAll(ctx, s.keys.orphans(r.ID))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return 0, fmt.Errorf("read orphans: %w", err)
	}
	var returned []*redis.Cmd
	cmds, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, r := range back {
			h := Hash(r.ID)
			p.ZRem(ctx, s.keys.awaited(l.ShardOf(h)), r.ID)
			for id, v := range all[k].Val() {
				tmo, _ := strconv.ParseInt(v, 10, 64)
				for _, i := range homes(l, id) {
					returned = append(returned, scriptOrphanRet.Run(ctx, p,
						[]string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i), s.keys.holds(i)},
						id, r.SeenAtMs-Epoch, tmo))
				}
			}
			if len(all[k].Val()) > 0 {
				p.Del(ctx, s.keys.orphans(r.ID))
			}
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return 0, fmt.Errorf("return orphans: %w", err)
	}
	n := 0
	for _, c := range returned {
		if v, _ := c.Int64(); v == 1 {
			n++
		}
	}
	return n, nil
}

// homes are device id's shards under l: its own, and while l migrates its
// previous one when that differs.
func homes(l Layout, id string) []int {
	h := Hash(id)
	out := []int{l.ShardOf(h)}
	if prev, moved := l.PreviousOf(h); moved {
		out = append(out, prev)
	}
	return out
}

// MoveKin moves the parent, gateway and hold entries of ids from shard
// from to shard to (a migration's sweep), copying before it deletes: a
// reader in between finds them in either (KinOf looks in both).
func (s *Store) MoveKin(ctx context.Context, from, to int, ids []string) error {
	if len(ids) == 0 || from == to {
		return nil
	}
	var parents, holds *redis.SliceCmd
	var named *redis.BoolSliceCmd
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		parents = p.HMGet(ctx, s.keys.Parents(from), parentFields(ids)...)
		named = p.SMIsMember(ctx, s.keys.gateways(from), toAny(ids)...)
		holds = p.HMGet(ctx, s.keys.holds(from), ids...)
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return fmt.Errorf("read kin of shard %d: %w", from, err)
	}
	var ps, hs, gs []any
	var psIDs, hsIDs, gsIDs []string
	for k, id := range ids {
		if v, ok := parents.Val()[k].(string); ok {
			f := ParentField(id)
			ps, psIDs = append(ps, f, v), append(psIDs, f)
		}
		if v, ok := holds.Val()[k].(string); ok {
			hs, hsIDs = append(hs, id, v), append(hsIDs, id)
		}
		if named.Val()[k] {
			gs, gsIDs = append(gs, id), append(gsIDs, id)
		}
	}
	if len(ps)+len(hs)+len(gs) == 0 {
		return nil
	}
	cmds, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(ps) > 0 {
			p.HSet(ctx, s.keys.Parents(to), ps...)
			p.HDel(ctx, s.keys.Parents(from), psIDs...)
		}
		if len(hs) > 0 {
			p.HSet(ctx, s.keys.holds(to), hs...)
			p.HDel(ctx, s.keys.holds(from), hsIDs...)
		}
		if len(gs) > 0 {
			p.SAdd(ctx, s.keys.gateways(to), gs...)
			p.SRem(ctx, s.keys.gateways(from), toAny(gsIDs)...)
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return fmt.Errorf("move kin from shard %d to %d: %w", from, to, err)
	}
	return nil
}

// ParentOf returns the parent of device id of shard i ("" when none).
func (s *Store) ParentOf(ctx context.Context, i int, id string) (string, error) {
	v, err := s.rdb.HGet(ctx, s.keys.Parents(i), ParentField(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read parent of %s: %w", id, err)
	}
	return v, nil
}

// EndWaits drops the holds of members of shard i that a heartbeat ended:
// their score moved on from the held one.
func (s *Store) EndWaits(ctx context.Context, i int, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.rdb.HDel(ctx, s.keys.holds(i), ids...).Err(); err != nil {
		return fmt.Errorf("end holds in shard %d: %w", i, err)
	}
	return nil
}

// HeldCount counts the children held for their parent in shards 0..n-1:
// the holds whose held score is still their member's (a child that beat
// meanwhile left its hold behind until it is next due). One pipeline of
// HLEN, then for the shards with holds their entries and scores.
func (s *Store) HeldCount(ctx context.Context, n int) (int64, error) {
	lens := make([]*redis.IntCmd, n)
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range lens {
			lens[i] = p.HLen(ctx, s.keys.holds(i))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return 0, fmt.Errorf("count holds: %w", err)
	}
	var total int64
	for i, c := range lens {
		if c.Val() == 0 {
			continue
		}
		holds, err := s.rdb.HGetAll(ctx, s.keys.holds(i)).Result()
		if err != nil {
			return 0, fmt.Errorf("read holds of shard %d: %w", i, err)
		}
		ids := make([]string, 0, len(holds))
		for id := range holds {
			ids = append(ids, id)
		}
		scores, err := s.rdb.ZMScore(ctx, s.keys.Deadlines(i), ids...).Result()
		if err != nil {
			return 0, fmt.Errorf("read held scores of shard %d: %w", i, err)
		}
		for k, id := range ids {
			if w, ok := parseWait(holds[id]); ok && scores[k] == w.At {
				total++
			}
		}
	}
	return total, nil
}

// Waiting reports whether device id of shard i is held for its parent.
func (s *Store) Waiting(ctx context.Context, i int, id string) (bool, error) {
	v, err := s.rdb.HGet(ctx, s.keys.holds(i), id).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read hold of %s: %w", id, err)
	}
	w, ok := parseWait(v)
	if !ok {
		return false, nil
	}
	score, there, err := s.Score(ctx, i, id)
	return there && score == w.At, err
}

// Unreachable returns, for ids of shard i, their parents ("" when none)
// and whether each is one of the children its parent's silence left
// waiting or unreachable: a device down and waiting for its parent was
// reported unreachable. Two round trips, the second only for devices with
// a parent.
func (s *Store) Unreachable(ctx context.Context, i int, ids []string) (parents []string, orphaned []bool, err error) {
	parents, orphaned = make([]string, len(ids)), make([]bool, len(ids))
	if len(ids) == 0 {
		return parents, orphaned, nil
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.Parents(i), parentFields(ids)...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read parents of shard %d: %w", i, err)
	}
	checks := make([]*redis.BoolCmd, len(ids))
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, v := range vals {
			if parent, ok := v.(string); ok {
				parents[k] = parent
				checks[k] = p.HExists(ctx, s.keys.orphans(parent), ids[k])
			}
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, nil, fmt.Errorf("read orphans: %w", err)
	}
	for k, c := range checks {
		orphaned[k] = c != nil && c.Val()
	}
	return parents, orphaned, nil
}

// UnreachableDown counts the devices down as unreachable (their parent's
// orphans, down in their shard under l and not tracked) whose down entry
// is at or after sinceMs, by class id. It reads every parent's orphans
// (a SCAN of the orphans keys, on every master of a cluster): when they
// hold more than max children it counts nothing and ok is false.
func (s *Store) UnreachableDown(ctx context.Context, l Layout, sinceMs int64, max int) (byClass map[int]int64, ok bool, err error) {
	keys, err := s.scanKeys(ctx, s.keys.prefix+":orphans:*")
	if err != nil {
		return nil, false, fmt.Errorf("find orphans: %w", err)
	}
	byShard := make(map[int][]string)
	total := 0
	for _, key := range keys {
		ids, err := s.rdb.HKeys(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("read orphans: %w", err)
		}
		if total += len(ids); total > max {
			return nil, false, nil
		}
		for _, id := range ids {
			i := l.ShardOf(Hash(id))
			byShard[i] = append(byShard[i], id)
		}
	}
	byClass = make(map[int]int64)
	since := Score(sinceMs, 0)
	for i, ids := range byShard {
		var down, live *redis.FloatSliceCmd
		cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			down, live = p.ZMScore(ctx, s.keys.Down(i), ids...), p.ZMScore(ctx, s.keys.Deadlines(i), ids...)
			return nil
		})
		if err := readErr(cmds, err); err != nil {
			return nil, false, fmt.Errorf("read orphans of shard %d: %w", i, err)
		}
		for k := range ids {
			if d := down.Val()[k]; d >= since && d > 0 && live.Val()[k] == 0 {
				_, meta := DecodeScore(d)
				byClass[meta.ClassID()]++
			}
		}
	}
	return byClass, true, nil
}

// scanKeys returns the keys matching pattern (SCAN; on every master of a
// cluster).
func (s *Store) scanKeys(ctx context.Context, pattern string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			out = append(out, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		return out, err
	}
	return out, scan(ctx, s.rdb)
}

// awaitedLookEvery is how often a write asks whether a shard's awaited set
// exists: a parent marked awaited is looked for by writes at most this
// late; a heartbeat of it before then is left to its children's next look
// at it (scanner), which is later.
const awaitedLookEvery = 1000 // ms

// awaitLook is a write's look at a shard's awaited set: whether it exists
// (every awaitedLookEvery), and which devices of the batch it holds (while
// it exists).
type awaitLook struct {
	shard  int
	exists *redis.IntCmd
	check  *redis.Cmd
}

// lookAwaited queues in p the look at shard i's awaited set for the batch's
// members sb: for a shard without one, an EXISTS and a ZMSCORE (of a key
// that is not there) a second, nothing more, so a fleet without parents
// pays next to nothing.
func (s *Store) lookAwaited(ctx context.Context, p redis.Pipeliner, i int, sb *shardBatch, looks []awaitLook) []awaitLook {
	now := s.wakes.Now().UnixMilli()
	look := awaitLook{shard: i}
	if at := s.awaitedAt[i].Load(); now-at >= awaitedLookEvery && s.awaitedAt[i].CompareAndSwap(at, now) {
		look.exists = p.Exists(ctx, s.keys.awaited(i))
	}
	// Looked up also when the set is asked for: a write that finds it
	// first does not miss the parent it holds.
	if s.awaitedOn[i].Load() || look.exists != nil {
		args := make([]any, 0, 2+sb.n)
		args = append(args, "zmscore", s.keys.awaited(i))
		for k := zaddHead + 1; k < len(sb.zadd); k += 2 {
			args = append(args, sb.zadd[k])
		}
		look.check = p.Do(ctx, args...)
	}
	if look.exists == nil && look.check == nil {
		return looks
	}
	return append(looks, look)
}

// awaitedFound appends to back the batch's devices its looks found
// awaited, as Awaited, and notes which shards' awaited sets exist.
func (s *Store) awaitedFound(b *Batch, looks []awaitLook, back []Recovered) []Recovered {
	for _, look := range looks {
		if look.exists != nil && look.exists.Err() == nil {
			s.awaitedOn[look.shard].Store(look.exists.Val() > 0)
		}
		if look.check == nil {
			continue
		}
		vals, err := look.check.Slice()
		if err != nil {
			continue // the scanner's own look at the parent covers it
		}
		sb := &b.shards[look.shard]
		for k, v := range vals {
			if v != nil && k < len(sb.ids) {
				back = append(back, Recovered{Shard: look.shard, ID: sb.ids[k], Awaited: true})
			}
		}
	}
	return back
}

// Await marks parents (in their shards under l) as awaited by children
// held for them at nowMs, and drops the marks older than ttl.
func (s *Store) Await(ctx context.Context, l Layout, parents []string, nowMs int64, ttl time.Duration) error {
	if len(parents) == 0 {
		return nil
	}
	pruned := make(map[int]bool)
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, parent := range parents {
			i := l.ShardOf(Hash(parent))
			p.ZAdd(ctx, s.keys.awaited(i), redis.Z{Score: float64(nowMs), Member: parent})
			if !pruned[i] {
				pruned[i] = true
				p.ZRemRangeByScore(ctx, s.keys.awaited(i), "-inf", "("+strconv.FormatInt(nowMs-ttl.Milliseconds(), 10))
			}
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return fmt.Errorf("mark parents awaited: %w", err)
	}
	return nil
}
