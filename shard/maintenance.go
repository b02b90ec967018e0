package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Maintenance windows (package maintenance) are kept under the key prefix,
// in the hash tag {maintenance}: their definitions, when each ends, which
// were ended early, and a version counter the instances poll. The devices
// a window holds are recorded per shard (Keys.Held), beside the deadlines
// they move, so the scripts that move them stay in one shard's slot.

var (
	scriptWindowStart = loadScript("window_start")
	scriptWindowEnd   = loadScript("window_end")
	scriptHeldMove    = loadScript("held_move")
	scriptHeldPrune   = loadScript("held_prune")
)

func init() {
	allScripts = append(allScripts, scriptWindowStart, scriptWindowEnd, scriptHeldMove, scriptHeldPrune)
}

// WindowMatch is what a window matches: listed devices, a class, or an id
// prefix (exactly one of them).
type WindowMatch struct {
	Devices []string `json:"devices,omitempty"`
	Class   string   `json:"class,omitempty"`
	Prefix  string   `json:"prefix,omitempty"`
}

// Window is a maintenance window as Redis keeps it.
type Window struct {
	ID      string      `json:"id"`
	Match   WindowMatch `json:"match"`
	FromMs  int64       `json:"from_ms"`
	UntilMs int64       `json:"until_ms"`
	Reason  string      `json:"reason"`
	// EndedAtMs is when `maintenance end` ended it (0: it was not).
	EndedAtMs int64 `json:"ended_at_ms,omitempty"`
}

// EndMs is when the window ends: its until_ms, or when it was ended.
func (w Window) EndMs() int64 {
	if w.EndedAtMs > 0 && w.EndedAtMs < w.UntilMs {
		return w.EndedAtMs
	}
	return w.UntilMs
}

// OpenAt reports whether the window holds devices at nowMs.
func (w Window) OpenAt(nowMs int64) bool { return w.FromMs <= nowMs && nowMs < w.EndMs() }

// ErrTooManyWindows is StartWindow's error when the limit of open windows
// is reached.
var ErrTooManyWindows = errors.New("too many open maintenance windows")

// ErrNoWindow is EndWindow's error for an unknown (or pruned) window id.
var ErrNoWindow = errors.New("no such maintenance window")

// ErrWindowEnded is EndWindow's error for a window that ended already.
var ErrWindowEnded = errors.New("maintenance window already ended")

func (s *Store) windowKeys() []string {
	return []string{s.keys.windows(), s.keys.windowEnds(), s.keys.windowsEnded(), s.keys.windowsVersion()}
}

// StartWindow opens w unless maxOpen windows are open at nowMs
// (ErrTooManyWindows), and drops windows that ended before keepAfterMs.
// It returns how many windows are open with w.
func (s *Store) StartWindow(ctx context.Context, w Window, maxOpen int, nowMs, keepAfterMs int64) (int, error) {
	w.EndedAtMs = 0
	doc, err := json.Marshal(w)
	if err != nil {
		return 0, err
	}
	res, err := scriptWindowStart.Run(ctx, s.rdb, s.windowKeys(), w.ID, doc, w.UntilMs, nowMs, maxOpen, keepAfterMs).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("start maintenance window: %w", err)
	}
	switch res[0] {
	case 1:
		return int(res[1]), nil
	case 0:
		return int(res[1]), ErrTooManyWindows
	default:
		return 0, fmt.Errorf("start maintenance window: id %s is taken", w.ID)
	}
}

// EndWindow ends window id at nowMs and returns it, ended.
func (s *Store) EndWindow(ctx context.Context, id string, nowMs int64) (Window, error) {
	res, err := scriptWindowEnd.Run(ctx, s.rdb, s.windowKeys(), id, nowMs).Slice()
	if err != nil {
		return Window{}, fmt.Errorf("end maintenance window %s: %w", id, err)
	}
	code, _ := res[0].(int64)
	if code == -1 {
		return Window{}, fmt.Errorf("%w: %s", ErrNoWindow, id)
	}
	doc, _ := res[1].(string)
	var w Window
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return Window{}, fmt.Errorf("maintenance window %s: %w", id, err)
	}
	if code == 0 {
		return w, fmt.Errorf("%w: %s", ErrWindowEnded, id)
	}
	w.EndedAtMs = nowMs
	return w, nil
}

// WindowsVersion is the counter every start and end moves; 0 before any.
func (s *Store) WindowsVersion(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.windowsVersion()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read maintenance version: %w", err)
	}
	return v, nil
}

// Windows returns every kept window, open or ended, with the version they
// are as of.
func (s *Store) Windows(ctx context.Context) (int64, []Window, error) {
	var ver *redis.StringCmd
	var defs, ended *redis.MapStringStringCmd
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ver = p.Get(ctx, s.keys.windowsVersion())
		defs = p.HGetAll(ctx, s.keys.windows())
		ended = p.HGetAll(ctx, s.keys.windowsEnded())
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return 0, nil, fmt.Errorf("read maintenance windows: %w", err)
	}
	v, _ := strconv.ParseInt(ver.Val(), 10, 64)
	out := make([]Window, 0, len(defs.Val()))
	for id, doc := range defs.Val() {
		var w Window
		if err := json.Unmarshal([]byte(doc), &w); err != nil {
			return 0, nil, fmt.Errorf("maintenance window %s: %w", id, err)
		}
		if e, ok := ended.Val()[id]; ok {
			w.EndedAtMs, _ = strconv.ParseInt(e, 10, 64)
		}
		out = append(out, w)
	}
	return v, out, nil
}

// Held stages: a device parked at its window's end, and a device released
// from it with its own timeout from the end.
const (
	HeldParked   = 'p'
	HeldReleased = 'r'
)

// HeldRecord is why a maintenance window moved a device: parked until the
// window's end (HeldParked), or given its own timeout from the end
// (HeldReleased). It stands only while the device's score is Score.
type HeldRecord struct {
	Stage     byte
	Score     float64
	TimeoutMs int64
	Window    string
}

func (r HeldRecord) String() string {
	return string(r.Stage) + "|" + strconv.FormatFloat(r.Score, 'f', -1, 64) + "|" +
		strconv.FormatInt(r.TimeoutMs, 10) + "|" + r.Window
}

func parseHeld(v string) (HeldRecord, bool) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 || len(parts[0]) != 1 {
		return HeldRecord{}, false
	}
	score, err1 := strconv.ParseFloat(parts[1], 64)
	timeout, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return HeldRecord{}, false
	}
	return HeldRecord{Stage: parts[0][0], Score: score, TimeoutMs: timeout, Window: parts[3]}, true
}

// HeldRecords returns the held records of ids in shard i (ok false where
// a device has none).
func (s *Store) HeldRecords(ctx context.Context, i int, ids []string) ([]HeldRecord, []bool, error) {
	recs, oks := make([]HeldRecord, len(ids)), make([]bool, len(ids))
	if len(ids) == 0 {
		return recs, oks, nil
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.Held(i), ids...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read held devices of shard %d: %w", i, err)
	}
	for k, v := range vals {
		if str, ok := v.(string); ok {
			recs[k], oks[k] = parseHeld(str)
		}
	}
	return recs, oks, nil
}

// HeldMove moves a device held by a maintenance window from its score
// From to Record.Score, recording Record.
type HeldMove struct {
	ID     string
	From   float64
	Record HeldRecord
}

// MoveHeld applies moves to shard i where the device's score is still
// From, and returns how many moved.
func (s *Store) MoveHeld(ctx context.Context, i int, moves []HeldMove) (int, error) {
	if len(moves) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 4*len(moves))
	for _, m := range moves {
		args = append(args, m.ID, m.From, m.Record.Score, m.Record.String())
	}
	n, err := scriptHeldMove.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Held(i)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("move held devices of shard %d: %w", i, err)
	}
	return n, nil
}

// ParkedBy returns the devices of shard i parked by window id whose score
// is still the one their record names, with their records.
func (s *Store) ParkedBy(ctx context.Context, i int, window string) ([]string, []HeldRecord, error) {
	var ids []string
	var recs []HeldRecord
	iter := s.rdb.HScan(ctx, s.keys.Held(i), 0, "", 500).Iterator()
	for iter.Next(ctx) {
		id := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		r, ok := parseHeld(iter.Val())
		if ok && r.Stage == HeldParked && r.Window == window {
			ids, recs = append(ids, id), append(recs, r)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, nil, fmt.Errorf("read held devices of shard %d: %w", i, err)
	}
	return ids, recs, nil
}

// HeldCounts returns, per window id, how many devices of shards 0..n-1 a
// window holds now: parked, and not moved on by a heartbeat since. A
// device a doubling or a halving moved to its shard under n is found
// there. It only reads (the read commands call it), in two or three
// pipelined round trips; its cost is the number of held records.
func (s *Store) HeldCounts(ctx context.Context, n int) (map[string]int64, error) {
	parked, err := s.parkedRecords(ctx, n)
	if err != nil {
		return nil, err
	}
	scores, err := s.scoresOf(ctx, parked)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	moved := make(map[int]heldSet)
	for i, set := range parked {
		for k, sc := range scores[i] {
			r := set.recs[k]
			if sc == r.Score {
				out[r.Window]++
			} else if home := Of(Hash(set.ids[k]), n); sc == 0 && home != i {
				moved[home] = moved[home].add(set.ids[k], r)
			}
		}
	}
	if len(moved) == 0 {
		return out, nil
	}
	scores, err = s.scoresOf(ctx, moved)
	if err != nil {
		return nil, err
	}
	for i, set := range moved {
		for k, sc := range scores[i] {
			if sc == set.recs[k].Score {
				out[set.recs[k].Window]++
			}
		}
	}
	return out, nil
}

// heldSet is some held records of one shard, by device id.
type heldSet struct {
	ids  []string
	recs []HeldRecord
}

func (h heldSet) add(id string, r HeldRecord) heldSet {
	h.ids, h.recs = append(h.ids, id), append(h.recs, r)
	return h
}

// parkedRecords reads the parked records of shards 0..n-1.
func (s *Store) parkedRecords(ctx context.Context, n int) (map[int]heldSet, error) {
	alls := make([]*redis.MapStringStringCmd, n)
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			alls[i] = p.HGetAll(ctx, s.keys.Held(i))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("count held devices: %w", err)
	}
	out := make(map[int]heldSet)
	for i, c := range alls {
		for id, v := range c.Val() {
			if r, ok := parseHeld(v); ok && r.Stage == HeldParked {
				out[i] = out[i].add(id, r)
			}
		}
	}
	return out, nil
}

// scoresOf reads the current scores of sets' devices in their shards (0:
// not there), in one pipeline.
func (s *Store) scoresOf(ctx context.Context, sets map[int]heldSet) (map[int][]float64, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	cmds := make(map[int]*redis.FloatSliceCmd, len(sets))
	all, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, set := range sets {
			cmds[i] = p.ZMScore(ctx, s.keys.Deadlines(i), set.ids...)
		}
		return nil
	})
	if err := readErr(all, err); err != nil {
		return nil, fmt.Errorf("count held devices: %w", err)
	}
	out := make(map[int][]float64, len(cmds))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// PruneHeld drops shard i's held records that no longer stand (see
// held_prune.lua): those of devices that beat again, fired or left. The
// record of a device a doubling or a halving moved to its shard under n
// (count: the layout's Shards) with its score unchanged stands: it is kept,
// for the device's release. It reads the records a page at a time and
// returns how many it dropped.
func (s *Store) PruneHeld(ctx context.Context, i, n int) (int, error) {
	dropped := 0
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.keys.Held(i), cursor, "", 500).Result()
		if err != nil {
			return dropped, fmt.Errorf("prune held devices of shard %d: %w", i, err)
		}
		m, err := s.pruneHeldPage(ctx, i, n, kv)
		dropped += m
		if err != nil {
			return dropped, err
		}
		if cursor = next; cursor == 0 {
			return dropped, nil
		}
	}
}

// pruneHeldPage drops the stale records of one HSCAN page (id, record, …).
func (s *Store) pruneHeldPage(ctx context.Context, i, n int, kv []string) (int, error) {
	if len(kv) < 2 {
		return 0, nil
	}
	var page heldSet
	for k := 0; k+1 < len(kv); k += 2 {
		r, _ := parseHeld(kv[k+1])
		page = page.add(kv[k], r)
	}
	scores, err := s.scoresOf(ctx, map[int]heldSet{i: page})
	if err != nil {
		return 0, err
	}
	moved := make(map[int]heldSet)
	var stale []any
	for k, sc := range scores[i] {
		id, r := page.ids[k], page.recs[k]
		switch home := Of(Hash(id), n); {
		case sc == r.Score:
		case sc == 0 && home != i:
			moved[home] = moved[home].add(id, r)
		default:
			stale = append(stale, id)
		}
	}
	elsewhere, err := s.scoresOf(ctx, moved)
	if err != nil {
		return 0, err
	}
	for j, set := range moved {
		for k, sc := range elsewhere[j] {
			if sc != set.recs[k].Score {
				stale = append(stale, set.ids[k])
			}
		}
	}
	if len(stale) == 0 {
		return 0, nil
	}
	m, err := scriptHeldPrune.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Held(i)}, stale...).Int()
	if err != nil {
		return 0, fmt.Errorf("prune held devices of shard %d: %w", i, err)
	}
	return m, nil
}
