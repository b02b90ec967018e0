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
