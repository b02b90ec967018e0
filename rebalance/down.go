package rebalance

import (
	"cmp"
	"context"
	"slices"
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
}

// DownQuery selects what ListDown returns.
type DownQuery struct {
	// Class keeps only the devices of this class; "" keeps all.
	Class string
	// Limit stops the listing after this many devices; 0 lists all.
	Limit int
	// Window keeps only the devices that timed out within it
	// (dispatch.recovery_window): the down sets are pruned lazily and may
	// hold older ones. 0 keeps all they hold.
	Window time.Duration
	// Pad is ingest.coalesce_window, which padded scores carry on top of
	// the deadline.
	Pad time.Duration
	// ScanCount is the ZSCAN COUNT of each call, which bounds the work of
	// each on Redis. Default: 1000.
	ScanCount int64
}

// DownList is what ListDown found.
type DownList struct {
	Devices []DownDevice `json:"devices"`
	// Truncated is true when the listing stopped at DownQuery.Limit with
	// down sets left unscanned: Devices is then a subset, in no particular
	// order of the whole.
	Truncated bool `json:"truncated"`
}

// ListDown reads the down sets of every shard of the current layout (both
// generations while migrating) with ZSCAN, a bounded call at a time; it
// writes nothing. Devices come longest down first.
func ListDown(ctx context.Context, store *shard.Store, policy *timeouts.Policy, q DownQuery, now time.Time) (DownList, error) {
	l, _, err := store.Layout(ctx)
	if err != nil {
		return DownList{}, err
	}
	count := q.ScanCount
	if count <= 0 {
		count = 1000
	}
	nowMs := now.UnixMilli()
	var out DownList
	// A sweep moving a down entry leaves it in both shards for a moment:
	// the later deadline counts, as in GetDevice.
	seen := make(map[string]int)
scan:
	for i := range max(l.Shards(), 1) {
		var cursor uint64
		for {
			ms, next, err := store.ScanDown(ctx, i, cursor, count)
			if err != nil {
				return DownList{}, err
			}
			for _, m := range ms {
				d := downDevice(m, i, policy, q.Pad, nowMs)
				if q.Class != "" && d.Class != q.Class {
					continue
				}
				if q.Window > 0 && d.DownForMs > q.Window.Milliseconds() {
					continue
				}
				if k, dup := seen[d.DeviceID]; dup {
					if d.DeadlineMs > out.Devices[k].DeadlineMs {
						out.Devices[k] = d
					}
					continue
				}
				if q.Limit > 0 && len(out.Devices) == q.Limit {
					out.Truncated = true
					break scan
				}
				seen[d.DeviceID] = len(out.Devices)
				out.Devices = append(out.Devices, d)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	slices.SortFunc(out.Devices, func(a, b DownDevice) int {
		return cmp.Or(cmp.Compare(a.DeadlineMs, b.DeadlineMs), strings.Compare(a.DeviceID, b.DeviceID))
	})
	if out.Devices == nil {
		out.Devices = []DownDevice{} // JSON [] rather than null
	}
	return out, nil
}

// downDevice decodes down entry m of shard i.
func downDevice(m shard.Member, i int, policy *timeouts.Policy, pad time.Duration, nowMs int64) DownDevice {
	deadline, meta := shard.DecodeScore(m.Score)
	if meta.Has(shard.FlagPadded) {
		deadline -= pad.Milliseconds()
	}
	d := DownDevice{DeviceID: m.ID, Shard: i, DeadlineMs: deadline, DownForMs: max(0, nowMs-deadline)}
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
