package simulate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// fleet knows the devices: their ids, their heartbeat payloads and which of
// them go silent when.
type fleet struct {
	start      time.Time
	prefix     string
	prefixJSON []byte // prefix escaped for a JSON string
	width      int    // digits of the largest device number
	tail       []byte // the constant end of every heartbeat
	silent     map[int]*silentDevice
}

type silentDevice struct {
	stopAfter time.Duration // since start
	lastBeat  time.Time
	beaten    bool
	gone      bool
}

func newFleet(cfg Config, r *rand.Rand, start time.Time) *fleet {
	f := &fleet{
		start:      start,
		prefix:     cfg.Prefix,
		prefixJSON: jsonEscape(cfg.Prefix),
		width:      len(strconv.Itoa(cfg.Devices - 1)),
		silent:     make(map[int]*silentDevice),
	}
	if cfg.Class != "" {
		f.tail = append(append(append(f.tail, `,"class":"`...), jsonEscape(cfg.Class)...), '"')
	}
	if cfg.TimeoutMs > 0 {
		f.tail = strconv.AppendInt(append(f.tail, `,"timeout_ms":`...), cfg.TimeoutMs, 10)
	}
	f.tail = append(f.tail, '}')

	// Floyd's sampling: k distinct devices out of n in O(k), without a
	// permutation of the whole fleet.
	n := cfg.Devices
	k := int(math.Round(cfg.Silent * float64(n)))
	for j := n - k; j < n; j++ {
		d := r.IntN(j + 1)
		if _, taken := f.silent[d]; taken {
			d = j
		}
		var after time.Duration
		if cfg.SilentAfter > 0 {
			after = time.Duration(r.Int64N(int64(cfg.SilentAfter)))
		}
		f.silent[d] = &silentDevice{stopAfter: after}
	}
	return f
}

// beats reports whether device dev sends its heartbeat now, recording the
// silence of a device that has just stopped.
func (f *fleet) beats(dev int, now time.Time, stats *Stats) bool {
	if len(f.silent) == 0 {
		return true
	}
	sd, ok := f.silent[dev]
	if !ok {
		return true
	}
	if sd.gone {
		return false
	}
	if sd.beaten && now.Sub(f.start) >= sd.stopAfter {
		sd.gone = true
		stats.Silenced = append(stats.Silenced, Silenced{ID: f.id(dev), LastBeat: sd.lastBeat})
		return false
	}
	sd.beaten = true
	sd.lastBeat = time.UnixMilli(now.UnixMilli()) // the ts it sent
	return true
}

func (f *fleet) id(dev int) string { return string(f.appendID(nil, dev)) }

// appendID appends the id of device dev: the prefix and its zero-padded number.
func (f *fleet) appendID(dst []byte, dev int) []byte {
	dst = append(dst, f.prefix...)
	return appendPadded(dst, dev, f.width)
}

// appendHeartbeat appends the heartbeat of device dev at tsMs.
func (f *fleet) appendHeartbeat(dst []byte, dev int, tsMs int64) []byte {
	dst = append(dst, `{"device_id":"`...)
	dst = append(dst, f.prefixJSON...)
	dst = appendPadded(dst, dev, f.width)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, tsMs, 10)
	return append(dst, f.tail...)
}

func appendPadded(dst []byte, v, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(v), 10)
	for range width - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// jsonEscape returns s escaped for the inside of a JSON string.
func jsonEscape(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b[1 : len(b)-1]
}
