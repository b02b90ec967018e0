package maintenance

import (
	"cmp"
	"slices"

	"github.com/flatline-dev/flatline/shard"
)

// Index answers, for a due device, which open window holds it, without
// looking at every window: listed devices and classes are map keys, and
// prefixes are map keys too, looked up once per distinct prefix length
// (at most 256, the longest device id). Built once per reload and read
// concurrently by every scanner; it never changes after NewIndex.
type Index struct {
	windows  []shard.Window
	devices  map[string][]int32
	classes  map[string][]int32
	prefixes map[string][]int32
	lengths  []int // the distinct prefix lengths, ascending
	// ends holds every kept window's until_ms and early end: a device
	// parked at a window's end, or given its timeout from it, has a
	// deadline at one of them or a timeout after one (MayHold).
	ends map[int64]struct{}
}

// NewIndex indexes ws as of nowMs: windows ended by then match nothing.
func NewIndex(ws []shard.Window, nowMs int64) *Index {
	x := &Index{windows: ws, devices: map[string][]int32{}, classes: map[string][]int32{},
		prefixes: map[string][]int32{}, ends: make(map[int64]struct{}, 2*len(ws))}
	for k, w := range ws {
		x.ends[w.UntilMs] = struct{}{}
		if w.EndedAtMs > 0 {
			x.ends[w.EndedAtMs] = struct{}{}
		}
		if w.EndMs() <= nowMs {
			continue
		}
		n := int32(k)
		switch {
		case len(w.Match.Devices) > 0:
			for _, id := range w.Match.Devices {
				x.devices[id] = append(x.devices[id], n)
			}
		case w.Match.Class != "":
			x.classes[w.Match.Class] = append(x.classes[w.Match.Class], n)
		case w.Match.Prefix != "":
			p := w.Match.Prefix
			if _, ok := x.prefixes[p]; !ok {
				x.lengths = append(x.lengths, len(p))
			}
			x.prefixes[p] = append(x.prefixes[p], n)
		}
	}
	slices.Sort(x.lengths)
	x.lengths = slices.Compact(x.lengths)
	return x
}

// Holding returns the window that holds device id (of class, "" for none)
// whose deadline deadlineMs passed, as of nowMs: among the windows open
// then that match it and had started by its deadline, the one ending
// last (a device in several windows is held until the last ends).
func (x *Index) Holding(id, class string, deadlineMs, nowMs int64) (shard.Window, bool) {
	best, found := shard.Window{}, false
	pick := func(ns []int32) {
		for _, n := range ns {
			w := x.windows[n]
			if w.OpenAt(nowMs) && w.FromMs <= deadlineMs && (!found || w.EndMs() > best.EndMs()) {
				best, found = w, true
			}
		}
	}
	pick(x.devices[id])
	if class != "" {
		pick(x.classes[class])
	}
	for _, l := range x.lengths {
		if l > len(id) {
			break
		}
		pick(x.prefixes[id[:l]])
	}
	return best, found
}

// MayHold reports whether a member at deadlineMs with timeoutMs may be one
// a window moved: its deadline is a window's end (parked), or its timeout
// from one (released). Only those are looked up in Redis.
func (x *Index) MayHold(deadlineMs, timeoutMs int64) bool {
	if len(x.ends) == 0 {
		return false
	}
	_, parked := x.ends[deadlineMs]
	_, released := x.ends[deadlineMs-timeoutMs]
	return parked || released
}

// Open returns the windows open at nowMs, ending first first.
func (x *Index) Open(nowMs int64) []shard.Window {
	var out []shard.Window
	for _, w := range x.windows {
		if w.OpenAt(nowMs) {
			out = append(out, w)
		}
	}
	sortWindows(out)
	return out
}

// All returns every kept window, open or ended, started first first.
func (x *Index) All() []shard.Window {
	out := slices.Clone(x.windows)
	sortWindows(out)
	return out
}

func sortWindows(ws []shard.Window) {
	slices.SortFunc(ws, func(a, b shard.Window) int {
		return cmp.Or(cmp.Compare(a.FromMs, b.FromMs), cmp.Compare(a.ID, b.ID))
	})
}
