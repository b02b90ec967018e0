package shard

import "math"

// A score packs a device's deadline and a little metadata into one float64,
// so the hot path stores one ZSET member per device and nothing else:
//
//	score = (deadline_ms - Epoch) << metaBits | meta
//
// The deadline sits in the high bits, so ZADD GT still means "only ever
// later", and "everything due by t" is the score range (-inf, MaxScore(t)].
// Integers up to 2^53 are exact in a float64, which leaves 41 bits of
// milliseconds: deadlines up to the year 2093.
const (
	// Epoch (2024-01-01T00:00:00Z, Unix ms) is the zero of stored deadlines.
	Epoch int64 = 1704067200000
	// metaBits is how many low bits of a score carry Meta.
	metaBits = 12
	metaMask = 1<<metaBits - 1
)

// Meta is the low part of a score: the device's class id and two flags.
type Meta uint16

const (
	// classBits of Meta hold the class id (0 = no class).
	classBits = 10
	// maxClassID is the largest class id a score can carry.
	maxClassID = 1<<classBits - 1
	// FlagOverride says the device's timeout is in the shard's overrides hash.
	FlagOverride Meta = 1 << classBits
	// FlagPadded says the deadline was padded by ingest.coalesce_window.
	FlagPadded Meta = 1 << (classBits + 1)
)

// NewMeta builds a Meta from a class id and flags.
func NewMeta(classID int, flags Meta) Meta { return Meta(classID&maxClassID) | flags }

// ClassID is the class id carried by m (0 = none).
func (m Meta) ClassID() int { return int(m & maxClassID) }

// Has reports whether flag f is set.
func (m Meta) Has(f Meta) bool { return m&f != 0 }

// Score encodes a deadline (Unix ms) and meta.
func Score(deadlineMs int64, m Meta) float64 {
	rel := deadlineMs - Epoch
	if rel < 0 {
		rel = 0
	}
	return float64(rel<<metaBits | int64(m&metaMask))
}

// DecodeScore splits a score into its deadline (Unix ms) and meta.
func DecodeScore(score float64) (deadlineMs int64, m Meta) {
	v := int64(score)
	return v>>metaBits + Epoch, Meta(v & metaMask)
}

// MaxScore is the largest score whose deadline is at or before t (Unix ms).
func MaxScore(t int64) float64 {
	if t < Epoch {
		return math.Inf(-1)
	}
	return Score(t, metaMask)
}
