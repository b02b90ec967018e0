package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The storm guard's state lives in the watermarks hash beside the
// watermarks, so that the firing gate reads the watermarks, the holds that
// cap them and the storm's name in one HGETALL, and the scripts that move
// them (stall_mark, stall_end, stall_expire, storm_name) change them
// together.

// Stall is a stalled signals partition as Redis holds it.
type Stall struct {
	// SinceMs is when the stall was detected (Unix ms).
	SinceMs int64
	// CapMs is the most the partition's watermark may reach while the
	// stall holds.
	CapMs int64
	// HWM is the partition's high-water mark at the stall: records past it
	// end the stall.
	HWM int64
	// Expired says the stall no longer holds firing (storm.max_hold, or
	// `flatline storm release`); the partition stays stalled until records
	// flow again.
	Expired bool
}

// Hold is the span in which stalled partitions hold firing: from the
// lowest cap of its stalls, while any is stalled.
type Hold struct {
	FromMs  int64 // no deadline after this fires while the hold lasts
	SinceMs int64 // the first stall's detection
	ID      string
	Expired bool // every stall expired: the hold no longer caps firing
}

// Held is a hold that ended when records flowed again on every stalled
// partition: a device whose deadline fell inside it is given its own
// timeout again from EndMs.
type Held struct {
	ID     string
	FromMs int64
	EndMs  int64
}

// StormName is the storm being named now.
type StormName struct {
	ID        string
	StartedMs int64
	// Announced says its storm_started event went out.
	Announced bool
}

// GateState is the whole watermarks hash: what the firing gate reads.
type GateState struct {
	Watermarks map[int]int64
	Partitions int
	Stalls     map[int]Stall
	Hold       *Hold
	Held       []Held
	Storm      *StormName
}

// ReadGate reads the watermarks hash in one round trip.
func (s *Store) ReadGate(ctx context.Context) (GateState, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Watermarks()).Result()
	if err != nil {
		return GateState{}, fmt.Errorf("read watermarks: %w", err)
	}
	return parseGate(m), nil
}

func parseGate(m map[string]string) GateState {
	st := GateState{Watermarks: make(map[int]int64, len(m))}
	for k, v := range m {
		switch {
		case k == "partitions":
			n, _ := strconv.Atoi(v)
			st.Partitions = n
		case k == "hold":
			f := strings.Split(v, ",")
			if len(f) == 4 {
				st.Hold = &Hold{FromMs: atoi64(f[0]), SinceMs: atoi64(f[1]), ID: f[2], Expired: f[3] == "1"}
			}
		case k == "storm":
			if n, ok := parseStorm(v); ok {
				st.Storm = &n
			}
		case strings.HasPrefix(k, "stall:"):
			p, err := strconv.Atoi(k[len("stall:"):])
			f := strings.Split(v, ",")
			if err != nil || len(f) != 4 {
				continue
			}
			if st.Stalls == nil {
				st.Stalls = make(map[int]Stall)
			}
			st.Stalls[p] = Stall{SinceMs: atoi64(f[0]), CapMs: atoi64(f[1]), HWM: atoi64(f[2]), Expired: f[3] == "1"}
		case strings.HasPrefix(k, "held:"):
			f := strings.Split(v, ",")
			if len(f) == 2 {
				st.Held = append(st.Held, Held{ID: k[len("held:"):], FromMs: atoi64(f[0]), EndMs: atoi64(f[1])})
			}
		default:
			p, err := strconv.Atoi(k)
			if err == nil {
				st.Watermarks[p] = atoi64(v)
			}
		}
	}
	return st
}

func parseStorm(v string) (StormName, bool) {
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return StormName{}, false
	}
	return StormName{ID: f[0], StartedMs: atoi64(f[1]), Announced: f[2] == "1"}, true
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// MarkStalled records partition p as stalled since sinceMs, its watermark
// capped at capMs until records past hwm arrive, and opens (as holdID) or
// widens the hold. It reports false when the partition was already
// recorded as stalled.
func (s *Store) MarkStalled(ctx context.Context, p int, sinceMs, capMs, hwm int64, holdID string) (bool, error) {
	n, err := scriptStallMark.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, p, sinceMs, capMs, hwm, holdID).Int()
	if err != nil {
		return false, fmt.Errorf("mark partition %d stalled: %w", p, err)
	}
	return n == 1, nil
}

// EndStall records that records flow again on partition p at endMs. It
// reports whether that ended the hold (p was the last stalled partition);
// a hold that lasted stormAfter or longer names storm stormID unless one is
// named. Ended holds older than keepFromMs are dropped.
func (s *Store) EndStall(ctx context.Context, p int, endMs, keepFromMs int64, stormAfter time.Duration, stormID string) (ended bool, err error) {
	n, err := scriptStallEnd.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, p, endMs, keepFromMs, stormAfter.Milliseconds(), stormID).Int()
	if err != nil {
		return false, fmt.Errorf("end the stall of partition %d: %w", p, err)
	}
	return n == 2, nil
}

// ExpireStalls stops the given stalled partitions (none: all) from holding
// firing, and returns how many stopped now. When that lifts the hold, storm
// stormID is named at nowMs unless one is named.
func (s *Store) ExpireStalls(ctx context.Context, stormID string, nowMs int64, partitions ...int) (int, error) {
	args := make([]any, 0, 2+len(partitions))
	args = append(args, stormID, nowMs)
	for _, p := range partitions {
		args = append(args, p)
	}
	n, err := scriptStallExpire.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("expire stalls: %w", err)
	}
	return n, nil
}

// NameStorm names a storm id started at startedMs unless one is named
// already, and returns the storm named after the call.
func (s *Store) NameStorm(ctx context.Context, id string, startedMs int64) (StormName, error) {
	v, err := scriptStormName.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, "start", id, startedMs).Text()
	if err != nil {
		return StormName{}, fmt.Errorf("name a storm: %w", err)
	}
	n, ok := parseStorm(v)
	if !ok {
		return StormName{}, fmt.Errorf("name a storm: unexpected answer %q", v)
	}
	return n, nil
}

// AnnouncedStorm records that storm id's storm_started event went out.
func (s *Store) AnnouncedStorm(ctx context.Context, id string) error {
	err := scriptStormName.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, "announced", id, 0).Err()
	if err != nil && err != redis.Nil {
		return fmt.Errorf("announce storm %s: %w", id, err)
	}
	return nil
}

// EndStorm ends the storm named id, if it is still the one named.
func (s *Store) EndStorm(ctx context.Context, id string) error {
	err := scriptStormName.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, "end", id, 0).Err()
	if err != nil && err != redis.Nil {
		return fmt.Errorf("end storm %s: %w", id, err)
	}
	return nil
}

// Reenter moves members to new scores where their score is unchanged
// (ms[k].Score is the score read; to[k] the new one), and returns how many
// moved.
func (s *Store) Reenter(ctx context.Context, i int, ms []Member, to []float64) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 3*len(ms))
	for k, m := range ms {
		args = append(args, m.ID, m.Score, to[k])
	}
	n, err := scriptReenter.Run(ctx, s.rdb, []string{s.keys.Deadlines(i)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("reenter shard %d: %w", i, err)
	}
	return n, nil
}

// Traffic is what the owner of a signals partition learned of its usual
// traffic, kept so that a new owner (a rebalance, a restart during an
// outage) can tell a stall without having seen the partition's records.
type Traffic struct {
	LastRecordMs int64 // the newest record's time
	HWM          int64 // the high-water mark after it
	ThresholdMs  int64 // how long the high-water mark may stand still
	Busy         bool  // recent records came from storm.min_devices devices or more
}

// SaveTraffic writes the owners' view of their partitions.
func (s *Store) SaveTraffic(ctx context.Context, t map[int]Traffic) error {
	if len(t) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(t))
	for p, v := range t {
		busy := 0
		if v.Busy {
			busy = 1
		}
		args = append(args, strconv.Itoa(p), fmt.Sprintf("%d,%d,%d,%d", v.LastRecordMs, v.HWM, v.ThresholdMs, busy))
	}
	if err := s.rdb.HSet(ctx, s.keys.traffic(), args...).Err(); err != nil {
		return fmt.Errorf("save partition traffic: %w", err)
	}
	return nil
}

// LoadTraffic reads what SaveTraffic wrote.
func (s *Store) LoadTraffic(ctx context.Context) (map[int]Traffic, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.traffic()).Result()
	if err != nil {
		return nil, fmt.Errorf("load partition traffic: %w", err)
	}
	out := make(map[int]Traffic, len(m))
	for k, v := range m {
		p, err := strconv.Atoi(k)
		f := strings.Split(v, ",")
		if err != nil || len(f) != 4 {
			continue
		}
		out[p] = Traffic{LastRecordMs: atoi64(f[0]), HWM: atoi64(f[1]), ThresholdMs: atoi64(f[2]), Busy: f[3] == "1"}
	}
	return out, nil
}

// CountFired adds n timeouts fired in the second secMs/1000 (Unix ms) to the
// storm counts, which keep the last keepSec seconds.
func (s *Store) CountFired(ctx context.Context, secMs int64, n int) error {
	key := s.keys.firedCounts()
	sec := strconv.FormatInt(secMs/1000, 10)
	pipe := s.rdb.Pipeline()
	pipe.HIncrBy(ctx, key, sec, int64(n))
	pipe.Expire(ctx, key, firedCountsTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("count fired: %w", err)
	}
	return nil
}

// firedCountsTTL drops the counts of a deployment that stopped firing.
const firedCountsTTL = time.Hour

// CountStorm adds to the tallies of storm id: its timeouts and recoveries.
func (s *Store) CountStorm(ctx context.Context, id string, timedOut, recovered int) error {
	key := s.keys.firedCounts()
	pipe := s.rdb.Pipeline()
	if timedOut > 0 {
		pipe.HIncrBy(ctx, key, "t:"+id, int64(timedOut))
	}
	if recovered > 0 {
		pipe.HIncrBy(ctx, key, "r:"+id, int64(recovered))
	}
	pipe.Expire(ctx, key, firedCountsTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("count storm %s: %w", id, err)
	}
	return nil
}

// StormTally returns the timeouts and recoveries counted for storm id and
// drops its tallies.
func (s *Store) StormTally(ctx context.Context, id string) (timedOut, recovered int64, err error) {
	key := s.keys.firedCounts()
	vs, err := s.rdb.HMGet(ctx, key, "t:"+id, "r:"+id).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("read storm %s tally: %w", id, err)
	}
	if v, ok := vs[0].(string); ok {
		timedOut = atoi64(v)
	}
	if v, ok := vs[1].(string); ok {
		recovered = atoi64(v)
	}
	_ = s.rdb.HDel(ctx, key, "t:"+id, "r:"+id).Err()
	return timedOut, recovered, nil
}

// FiredSince returns the timeouts counted from the second of fromMs on,
// and drops the counts before it.
func (s *Store) FiredSince(ctx context.Context, fromMs int64) (int64, error) {
	key := s.keys.firedCounts()
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("read fired counts: %w", err)
	}
	from := fromMs / 1000
	var total int64
	var old []string
	for k, v := range m {
		sec, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			continue // a storm's tally
		}
		if sec < from {
			old = append(old, k)
			continue
		}
		total += atoi64(v)
	}
	if len(old) > 0 {
		_ = s.rdb.HDel(ctx, key, old...).Err()
	}
	return total, nil
}
