package inspect

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// DownDevice is a device that timed out and has not beaten since: a line of
// `flatline devices down`.
type DownDevice struct {
	DeviceID string `json:"device_id"`
	Shard    int    `json:"shard"`
	Class    string `json:"class,omitempty"`
	// DeadlineMs is the deadline that passed (Unix ms): down since then.
	DeadlineMs int64 `json:"deadline_ms"`
	DownForMs  int64 `json:"down_for_ms"`
	// Parent is the device's gateway, when it has one (SPEC §14).
	Parent string `json:"parent,omitempty"`
	// State is timed_out, or unreachable: silent while its parent was
	// down (an unreachable event, not a timeout).
	State string `json:"state"`
}

// Device states (`flatline device get`, `flatline devices down`).
const (
	StateTracked     = "tracked"
	StateHeld        = "held"
	StateMaintenance = "maintenance"
	StateTimedOut    = "timed_out"
	StateUnreachable = "unreachable"
	StateUntracked   = "untracked"
)

// DownPageDefault is how many devices ListDown returns when DownQuery.Limit
// is 0: GET /devices/down's default page.
const DownPageDefault = 1000

// downChunk is how many down entries one read takes by default.
const downChunk = 1000

// DownQuery selects what ListDown returns.
type DownQuery struct {
	// Class keeps only the devices of this class; "" keeps all.
	Class string
	// Parent keeps only the children of this device; "" keeps all.
	Parent string
	// Limit is the most devices of one page; 0 is DownPageDefault. What a
	// call holds grows with it, never with how many devices are down.
	Limit int
	// Cursor resumes the listing after the page that returned it as
	// DownList.Next; "" starts at the beginning. A cursor ListDown did not
	// give is a *CursorError.
	Cursor string
	// Window keeps only the devices that timed out within it
	// (dispatch.recovery_window): the down sets are pruned lazily and may
	// hold older ones. 0 keeps all they hold.
	Window time.Duration
	// Pad is ingest.coalesce_window, which padded scores carry on top of
	// the deadline.
	Pad time.Duration
	// Chunk is how many down entries each read from Redis takes, which
	// bounds the work of each on Redis. Default: 1000.
	Chunk int
}

// DownList is a page of what ListDown found.
type DownList struct {
	// Devices are in the listing's order: by shard, then longest down
	// first (see ListDown).
	Devices []DownDevice `json:"devices"`
	// Truncated is true when more devices follow: Next lists them.
	Truncated bool `json:"truncated"`
	// Next is the DownQuery.Cursor of the next page; empty after the last.
	Next string `json:"next,omitempty"`
}

// CursorError is a DownQuery.Cursor that ListDown did not give: the
// caller's mistake, answered 400 over HTTP.
type CursorError struct{}

func (*CursorError) Error() string {
	return "cursor: not one a listing of the devices down gave; start without one"
}

// BadRequest tells the HTTP server the request is at fault.
func (*CursorError) BadRequest() bool { return true }

// ListDown reads a page of the devices down: the down sets of every shard
// of the current layout (both generations while migrating), a bounded
// read at a time; it writes nothing and sends only reads (ZCOUNT, ZRANGE,
// ZMSCORE).
//
// The listing's order is each shard's down set's own order, shard after
// shard: by shard, then by score (the deadline that passed: longest down
// first), then by device id. A cursor is a place in that order (shard,
// score, id), so the pages follow one another without repeating or
// missing a device that stays down meanwhile, whatever else times out or
// recovers: a device's place depends on its own entry alone. (An order
// by device id across a shard would be as stable, but the down sets are
// ZSETs scored by deadline, and Redis can only range them by score.) A
// device that recovers and times out again between two pages moves to its
// new deadline, and is listed again if that is after the cursor. While a
// migration sweep moves entries to other shards (`shards scale`), a device
// moved between two pages may be listed twice or, from a shard not read
// yet to one already read, not at all.
//
// A device in two down sets (a sweep copies an entry before it removes
// the original) is listed once: from the shard with the later deadline,
// the shard it is written to now on a tie; an entry in neither of the
// device's shards under the layout is a leftover, listed only when they
// hold none.
func ListDown(ctx context.Context, store *shard.Store, policy *timeouts.Policy, q DownQuery, now time.Time) (DownList, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DownPageDefault
	}
	chunk := q.Chunk
	if chunk <= 0 {
		chunk = downChunk
	}
	if q.Class == "" && q.Parent == "" {
		// Every entry read counts, but one past the page, which tells
		// whether another page follows.
		chunk = min(chunk, limit+1)
	}
	from, err := parseDownCursor(q.Cursor)
	if err != nil {
		return DownList{}, err
	}
	l, _, err := store.Layout(ctx)
	if err != nil {
		return DownList{}, err
	}
	if l.Count == 0 {
		l.Count = 1
	}
	since := DownSince(q.Window, now)
	minScore := shard.Score(since, 0)
	// One round trip skips the shards with nothing down, most of them in a
	// healthy fleet of many shards.
	held, err := store.DownSince(ctx, l.Shards(), since)
	if err != nil {
		return DownList{}, err
	}
	nowMs := now.UnixMilli()
	out := DownList{Devices: make([]DownDevice, 0, min(limit, 256))}
	var last downCursor
	for i := from.Shard; i < len(held); i++ {
		if held[i] == 0 {
			continue
		}
		var after *shard.DownPos
		if i == from.Shard && from.Pos.ID != "" {
			after = &from.Pos
		}
		for {
			ps, done, err := store.DownAfter(ctx, i, minScore, after, chunk)
			if err != nil {
				return DownList{}, err
			}
			ds, err := listed(ctx, store, l, i, ps, policy, q, nowMs)
			if err != nil {
				return DownList{}, err
			}
			for k, d := range ds {
				if d == nil {
					continue
				}
				if len(out.Devices) == limit {
					// A device past the page: the next one starts after
					// the last listed.
					out.Truncated, out.Next = true, last.String()
					return out, nil
				}
				out.Devices = append(out.Devices, *d)
				last = downCursor{Shard: i, Pos: ps[k]}
			}
			if done || len(ps) == 0 {
				break
			}
			after = &ps[len(ps)-1]
		}
	}
	return out, nil
}

// listed returns, for each of ps (down entries of shard i), the device
// the listing shows, or nil: a device listed from another down set (see
// listedHere), or one the query leaves out.
func listed(ctx context.Context, store *shard.Store, l shard.Layout, i int, ps []shard.DownPos, policy *timeouts.Policy, q DownQuery, nowMs int64) ([]*DownDevice, error) {
	keep, err := listedHere(ctx, store, l, i, ps)
	if err != nil {
		return nil, err
	}
	parents, orphaned, err := store.Unreachable(ctx, i, downIDs(ps))
	if err != nil {
		return nil, err
	}
	out := make([]*DownDevice, len(ps))
	for k, p := range ps {
		if !keep[k] {
			continue
		}
		d := downDevice(p.Member, i, policy, q.Pad, nowMs)
		d.Parent = parents[k]
		if orphaned[k] {
			d.State = StateUnreachable
		}
		if q.Class != "" && d.Class != q.Class || q.Parent != "" && d.Parent != q.Parent ||
			q.Window > 0 && d.DownForMs > q.Window.Milliseconds() {
			continue
		}
		out[k] = &d
	}
	return out, nil
}

// listedHere reports, for each of ps (down entries of shard i), whether
// the listing shows the device from this entry rather than from another
// down set holding it (see ListDown). Only an entry outside the shard its
// device is written to, or of a device a migration moves, needs a look at
// another shard: one ZMSCORE per shard looked at.
func listedHere(ctx context.Context, store *shard.Store, l shard.Layout, i int, ps []shard.DownPos) ([]bool, error) {
	keep := make([]bool, len(ps))
	type other struct {
		k, shard int
	}
	var asks map[int][]shard.Member // shard -> the ids to look up there
	var others []other
	for k, p := range ps {
		keep[k] = true
		h := shard.Hash(p.ID)
		for _, j := range candidateShards(l, h) {
			if j == i {
				continue
			}
			if asks == nil {
				asks = make(map[int][]shard.Member)
			}
			others = append(others, other{k, j})
			asks[j] = append(asks[j], p.Member)
		}
	}
	scores := make(map[int][]float64, len(asks))
	for j, ms := range asks {
		s, err := store.DownScores(ctx, j, ms)
		if err != nil {
			return nil, err
		}
		scores[j] = s
	}
	seen := make(map[int]int, len(asks)) // shard -> how many of its answers are read
	for _, o := range others {
		s := scores[o.shard][seen[o.shard]]
		seen[o.shard]++
		if s == 0 { // not down there
			continue
		}
		h := shard.Hash(ps[o.k].ID)
		own := slices.Contains(candidateShards(l, h), i)
		mine := ps[o.k].Score
		if !own || s > mine || s == mine && o.shard == l.ShardOf(h) {
			keep[o.k] = false
		}
	}
	return keep, nil
}

// candidateShards are the down sets that may hold a device with hash h
// under l: the shard it is written to, and while a migration moves it, the
// one it comes from.
func candidateShards(l shard.Layout, h uint64) []int {
	cur := l.ShardOf(h)
	if prev, moved := l.PreviousOf(h); moved {
		return []int{cur, prev}
	}
	return []int{cur}
}

// downCursor is a place in the listing of ListDown: after the entry Pos of
// shard Shard (before the shard's first when Pos.ID is empty).
type downCursor struct {
	Shard int
	Pos   shard.DownPos
}

// String encodes c as an opaque token, safe in a URL query.
func (c downCursor) String() string {
	raw := strconv.Itoa(c.Shard) + ":" + strconv.FormatInt(int64(c.Pos.Score), 10) + ":" +
		strconv.Itoa(c.Pos.Tie) + ":" + c.Pos.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseDownCursor decodes what downCursor.String encoded; "" is the start.
func parseDownCursor(s string) (downCursor, error) {
	if s == "" {
		return downCursor{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return downCursor{}, &CursorError{}
	}
	// The id comes last: it may hold colons.
	f := strings.SplitN(string(raw), ":", 4)
	if len(f) != 4 || f[3] == "" {
		return downCursor{}, &CursorError{}
	}
	i, err1 := strconv.Atoi(f[0])
	score, err2 := strconv.ParseInt(f[1], 10, 64)
	tie, err3 := strconv.Atoi(f[2])
	// Scores are whole numbers below 2^53 (see shard.Score).
	if err1 != nil || err2 != nil || err3 != nil || i < 0 || i >= shard.MaxShards || score < 0 || score >= 1<<53 || tie < 1 {
		return downCursor{}, &CursorError{}
	}
	return downCursor{Shard: i, Pos: shard.DownPos{Member: shard.Member{ID: f[3], Score: float64(score)}, Tie: tie}}, nil
}

// downDevice decodes down entry m of shard i.
func downDevice(m shard.Member, i int, policy *timeouts.Policy, pad time.Duration, nowMs int64) DownDevice {
	deadline, meta := shard.DecodeScore(m.Score)
	if meta.Has(shard.FlagPadded) {
		deadline -= pad.Milliseconds()
	}
	d := DownDevice{DeviceID: m.ID, Shard: i, DeadlineMs: deadline, DownForMs: max(0, nowMs-deadline), State: StateTimedOut}
	if c, ok := policy.ByID(meta.ClassID()); ok {
		d.Class = c.Name
	}
	return d
}

// DownByClassMax is the most devices down that CountDown splits by class.
// The class is in the low bits of a down entry's score, which no score
// range selects, so splitting reads every entry (in Redis, about 1.5 µs
// each: 100,000 down cost Redis some 150 ms per scrape, per instance
// scraped). Up to 10,000 that is at most some 15 ms; beyond, the total
// alone (a ZCOUNT per shard, well under a millisecond) is exported, under
// metrics.DownAllClasses, and `flatline devices down --class` or GET
// /devices/down?class= tells the classes.
const DownByClassMax = 10_000

// DownCount is how many devices are down: flatline_devices_down.
type DownCount struct {
	Total int64
	// ByClass splits Total by class name ("" = no class, and a class id
	// this policy does not know); every configured class is there, 0 when
	// none is down. Nil when Total is above the split limit.
	ByClass map[string]int64
	// RoundTrips is how many round trips to Redis the count took.
	RoundTrips int
}

// CountDown counts the devices down in shards 0..n-1 that timed out within
// window (0 counts every entry the down sets hold), and splits them by
// class when they are at most byClassMax. It writes nothing, but splitting
// runs a script, which serve loads: the read commands count with
// shard.Store.DownSince.
//
// Unlike ListDown it compares the window with the deadline as stored, so a
// device whose deadline was padded by ingest.coalesce_window counts up to
// that much longer; and a down entry a migration sweep is moving counts
// in both shards for the moment it is in both.
func CountDown(ctx context.Context, store *shard.Store, policy *timeouts.Policy, n int, window time.Duration, byClassMax int64, now time.Time) (DownCount, error) {
	since := DownSince(window, now)
	per, err := store.DownSince(ctx, n, since)
	if err != nil {
		return DownCount{}, err
	}
	out := DownCount{RoundTrips: 1}
	for _, c := range per {
		out.Total += c
	}
	if out.Total > byClassMax {
		return out, nil
	}
	out.ByClass = map[string]int64{"": 0}
	for _, name := range policy.Config().ClassNames() {
		out.ByClass[name] = 0
	}
	if out.Total == 0 {
		return out, nil
	}
	split, err := store.CountDownByClass(ctx, n, since, 0)
	if err != nil {
		return DownCount{}, err
	}
	out.RoundTrips += split.RoundTrips
	for id, c := range split.Counts {
		name := ""
		if class, ok := policy.ByID(id); ok {
			name = class.Name
		}
		out.ByClass[name] += c
	}
	return out, nil
}

// DownSince is the earliest deadline (Unix ms) of a device down within
// window at now: 0, the beginning of every deadline, when window is 0.
func DownSince(window time.Duration, now time.Time) int64 {
	if window <= 0 {
		return 0
	}
	return now.Add(-window).UnixMilli()
}

// downIDs are the device ids of ps.
func downIDs(ps []shard.DownPos) []string {
	out := make([]string, len(ps))
	for k, p := range ps {
		out[k] = p.ID
	}
	return out
}
