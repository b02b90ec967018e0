package inspect

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// WindowStatus is a maintenance window as /status, `maintenance list` and
// `maintenance start -o json` show it: Held is how many devices it holds
// now (parked at its end, not heard since).
type WindowStatus struct {
	ID        string            `json:"id"`
	Match     shard.WindowMatch `json:"match"`
	FromMs    int64             `json:"from_ms"`
	UntilMs   int64             `json:"until_ms"`
	Reason    string            `json:"reason"`
	Held      int64             `json:"held"`
	EndedAtMs int64             `json:"ended_at_ms,omitempty"`
}

// Maintenance returns the windows open at now, started first first; all
// adds the ended ones still kept, with their ended_at_ms (until_ms for a
// window that ended by its time).
func Maintenance(ctx context.Context, store *shard.Store, all bool, now time.Time) ([]WindowStatus, error) {
	_, ws, err := store.Windows(ctx)
	if err != nil {
		return nil, err
	}
	nowMs := now.UnixMilli()
	out := make([]WindowStatus, 0, len(ws))
	for _, w := range ws {
		open := w.OpenAt(nowMs)
		if !open && !all {
			continue
		}
		st := WindowStatus{ID: w.ID, Match: w.Match, FromMs: w.FromMs, UntilMs: w.UntilMs, Reason: w.Reason}
		if !open {
			st.EndedAtMs = w.EndMs()
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b WindowStatus) int {
		return cmp.Or(cmp.Compare(a.FromMs, b.FromMs), cmp.Compare(a.ID, b.ID))
	})
	if len(out) == 0 {
		return out, nil
	}
	return out, countHeld(ctx, store, out)
}

// countHeld fills in how many devices each window holds.
func countHeld(ctx context.Context, store *shard.Store, out []WindowStatus) error {
	l, ok, err := store.Layout(ctx)
	if err != nil || !ok {
		return err
	}
	held, err := store.HeldCounts(ctx, l.Shards())
	if err != nil {
		return err
	}
	for k := range out {
		out[k].Held = held[out[k].ID]
	}
	return nil
}
