package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/shard"
)

// GrowthResult is the growth sweep: flatline's figures as the tracked
// fleet grows, every measurement of every size on fresh servers.
type GrowthResult struct {
	Sizes []*GrowthSize `json:"sizes"`
	// The largest size's figure over the smallest's: Redis bytes per device
	// (1 is linear), Redis's own ZADD GT ceiling, flatline's exact ingest
	// and its mass expiry's drain rate.
	MemoryRatio  float64 `json:"bytes_per_device_largest_to_smallest"`
	CeilingRatio float64 `json:"ceiling_largest_to_smallest"`
	IngestRatio  float64 `json:"exact_ingest_largest_to_smallest"`
	DrainRatio   float64 `json:"mass_drain_largest_to_smallest"`
}

// GrowthSize is one tracked-fleet size.
type GrowthSize struct {
	Devices int     `json:"devices"`
	Seconds float64 `json:"seconds"`
	// Flatline is the flatline instances' configuration at this size: the
	// settings that shape its Redis writes and those the runs give it.
	Flatline map[string]string `json:"flatline_config"`
	// The keyspace, loaded through Store.Write (the ingest path) into a
	// fresh redis-server; UsedMemoryBytes is used_memory after − before.
	PopulateSeconds   float64 `json:"populate_seconds"`
	PopulatePerSecond float64 `json:"populate_members_per_second"`
	UsedMemoryBytes   int64   `json:"used_memory_bytes"`
	BytesPerDevice    float64 `json:"bytes_per_device"`
	// Exact ingest of a fleet spread evenly over the keyspace, each run
	// followed at once by the ceiling on the same devices; the median pair
	// by ratio counts.
	IngestDevices    int          `json:"ingest_devices"`
	IngestHeartbeats int          `json:"ingest_heartbeats"`
	Pairs            []IngestPair `json:"pairs"`
	ExactPerSecond   float64      `json:"exact_heartbeats_per_second"`
	CeilingPerSecond float64      `json:"ceiling_members_per_second"`
	RatioExact       float64      `json:"ratio_exact_to_ceiling"`
	// Lateness with this many devices tracked, under -lat-rate and under
	// -lat-sparse-rate, and the first's p99 over the second's.
	Lateness       *LatenessResult `json:"lateness,omitempty"`
	LatenessSparse *LatenessResult `json:"lateness_sparse,omitempty"`
	RatioLateness  float64         `json:"ratio_lateness_load_to_trickle,omitempty"`
	// Mass is -mass-devices due at once on top of this many tracked.
	Mass *MassResult `json:"mass_expiry,omitempty"`
}

// growthReferenceSizes are -growth-sizes' default, at which the growth
// targets are measured.
var growthReferenceSizes = []int{100_000, 1_000_000, 10_000_000}

// The growth targets, at every size: exact ingest over the ZADD GT
// ceiling on the same keyspace, lateness under load over the trickle's.
const (
	growthIngestTarget   = 0.6
	growthLatenessTarget = latenessLoadRatio
)

// growthIngestTimeout is timeouts.default in the growth sweep's ingest
// runs: their deadlines land after the keyspace's (10–20 min out), so
// every heartbeat moves one, and before the ceiling's (an hour out).
const growthIngestTimeout = "1h"

// runGrowth measures every size of -growth-sizes in turn. What was
// measured is returned with an error.
func runGrowth(ctx context.Context, o *options) (*GrowthResult, error) {
	if len(o.growthSizes) == 0 {
		return nil, fmt.Errorf("no -growth-sizes")
	}
	res := &GrowthResult{}
	largest := slices.Max(o.growthSizes)
	for k, size := range o.growthSizes {
		t := time.Now()
		gs, err := growthSize(ctx, o, size, largest, countAt(o.growthPairs, k))
		gs.Seconds = time.Since(t).Seconds()
		res.Sizes = append(res.Sizes, gs)
		if err != nil {
			return res, fmt.Errorf("%s devices: %w", num(size), err)
		}
		status("growth: %s devices done in %.0f s", num(size), gs.Seconds)
	}
	sorted := slices.Clone(res.Sizes)
	sortBy(sorted, func(s *GrowthSize) float64 { return float64(s.Devices) })
	lo, hi := sorted[0], sorted[len(sorted)-1]
	res.MemoryRatio = ratioOf(hi.BytesPerDevice, lo.BytesPerDevice)
	res.CeilingRatio = ratioOf(hi.CeilingPerSecond, lo.CeilingPerSecond)
	res.IngestRatio = ratioOf(hi.ExactPerSecond, lo.ExactPerSecond)
	if hi.Mass != nil && lo.Mass != nil {
		res.DrainRatio = ratioOf(hi.Mass.EventsPerSecond, lo.Mass.EventsPerSecond)
	}
	return res, nil
}

// ratioOf is a / b, 0 without b.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// growthSize measures one size: ingest and memory over its keyspace, then
// lateness with as many devices, then a mass expiry on top of it, each on
// fresh servers.
func growthSize(ctx context.Context, o *options, size, largest, pairs int) (*GrowthSize, error) {
	gs := &GrowthSize{Devices: size, Flatline: growthConfig(o, size)}
	// The keyspace's ids are made again for the mass expiry rather than
	// kept through lateness: ten million strings in the bench's heap slow
	// its collections, which pause the bench's Kafka.
	if err := growthIngest(ctx, o, gs, keyspaceIDs("g-", size, largest), pairs); err != nil {
		return gs, err
	}

	lo := *o
	lo.latDevices, lo.latProbes = size, min(o.latProbes, size)
	lo.cpuprofile = growthProfile(o, size)
	defer func() { o.profiles = lo.profiles }()
	var err error
	status("growth: %s devices: lateness under %s resets/s", num(size), num(o.latRate))
	if gs.Lateness, err = runLateness(ctx, &lo, o.latRate); err != nil {
		return gs, err
	}
	if o.latSparse > 0 {
		status("growth: %s devices: lateness under %s resets/s", num(size), num(o.latSparse))
		if gs.LatenessSparse, err = runLateness(ctx, &lo, o.latSparse); err != nil {
			return gs, err
		}
		gs.RatioLateness = ratioOf(gs.Lateness.Lateness.P99, gs.LatenessSparse.Lateness.P99)
	}
	status("growth: %s devices: lateness p99 %.1f ms under load, %.1f ms under the trickle: %.2f ×",
		num(size), gs.Lateness.Lateness.P99, pOf(gs.LatenessSparse), gs.RatioLateness)

	lo.massTracked = keyspaceIDs("g-", size, largest)
	// The due devices load on top of the keyspace, slower than the
	// populate's average: at 10,000,000 devices 1.5 times its time ended
	// after the deadline.
	lo.massMargin = max(o.massMargin, time.Second+time.Duration(3*float64(o.massDevices)/max(gs.PopulatePerSecond, 1)*float64(time.Second)))
	status("growth: %s devices: mass expiry of %s on top", num(size), num(o.massDevices))
	if gs.Mass, err = runMassOnce(ctx, &lo, 0); err != nil {
		return gs, err
	}
	status("growth: %s devices: mass expiry %s events/s, last at +%.2f s", num(size), num(gs.Mass.EventsPerSecond), gs.Mass.LastSeconds)
	return gs, nil
}

// pOf is a lateness run's p99, 0 for none.
func pOf(l *LatenessResult) float64 {
	if l == nil {
		return 0
	}
	return l.Lateness.P99
}

// growthProfile is the -cpuprofile prefix of a size's runs (none without
// -cpuprofile), so that they do not overwrite the other scenarios'.
func growthProfile(o *options, size int) string {
	if o.cpuprofile == "" {
		return ""
	}
	return fmt.Sprintf("%s-growth-%d", o.cpuprofile, size)
}

// growthIngest loads size devices' deadlines, 10–20 min out, through
// Store.Write into a fresh redis-server, Redis's used_memory before and
// after, then measures pairs of exact ingest and ceiling over a fleet of
// -ingest-devices spread evenly over that keyspace.
func growthIngest(ctx context.Context, o *options, gs *GrowthSize, ids []string, pairs int) error {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return err
	}
	defer infra.stop()
	rp, st := infra.rp, infra.st
	before, err := rp.UsedMemory(ctx)
	if err != nil {
		return err
	}
	note := ""
	if len(ids) >= 5_000_000 {
		note = " (half a minute at this size)"
	}
	status("growth: %s devices: populating the keyspace through Store.Write%s", num(len(ids)), note)
	base, n := time.Now().Add(10*time.Minute).UnixMilli(), int64(len(ids))
	deadline := func(k int) int64 { return base + int64(k)*600_000/n }
	load, err := loadDeadlines(ctx, st, o.shards, ids, deadline)
	if err != nil {
		return err
	}
	after, err := rp.UsedMemory(ctx)
	if err != nil {
		return err
	}
	gs.PopulateSeconds, gs.PopulatePerSecond = load.Seconds(), float64(len(ids))/load.Seconds()
	gs.UsedMemoryBytes, gs.BytesPerDevice = after-before, float64(after-before)/float64(len(ids))
	status("growth: %s devices: populated in %.1f s (%s/s), %.1f B a device", num(len(ids)), gs.PopulateSeconds, num(gs.PopulatePerSecond), gs.BytesPerDevice)

	at := spread(len(ids), o.ingestDevices)
	fleet := make([]string, len(at))
	for k, i := range at {
		fleet[k] = ids[i]
	}
	rounds := max(1, o.ingestHeartbeats/o.ingestDevices)
	gs.IngestDevices, gs.IngestHeartbeats = len(fleet), rounds*len(fleet)
	status("growth: %s devices: preloading %s heartbeats of %s of them", num(len(ids)), num(gs.IngestHeartbeats), num(len(fleet)))
	ends, err := preload(ctx, infra.brokers, infra.kc.SignalsTopic, fleet, rounds, time.Now().Add(-time.Duration(rounds)*time.Second), time.Second)
	if err != nil {
		return err
	}
	fo := *o
	fo.ingestDevices = len(fleet)
	fo.cpuprofile = growthProfile(o, len(ids))
	defer func() { o.profiles = fo.profiles }()
	for k := 0; k < max(1, pairs); k++ {
		// Every pair starts from the same state: the fleet's deadlines
		// where the populate put them (a pair moves them an hour out),
		// rewritten, moved out and back, before the first pair too. With
		// the first pair alone on members untouched since the populate,
		// flatline's ZADDs cost Redis 3.7–5.5 µs a member there at
		// 10,000,000 devices (16 to 256 shards) and 2.5–4.4 in the second;
		// with the rewrite before each (16 shards), 4.0–4.6 in every pair.
		for _, later := range []int64{30 * 60_000, 0} {
			if err := restamp(ctx, rp.rdb, o.shards, fleet, func(j int) int64 { return deadline(at[j]) + later }); err != nil {
				return err
			}
		}
		var pair IngestPair
		mode := fmt.Sprintf("growth-%d-exact-%d", len(ids), k+1)
		if pair.Exact, err = ingestOnce(ctx, &fo, infra.brokers, rp, st, ends, gs.IngestHeartbeats, mode, map[string]string{"timeouts.default": growthIngestTimeout}); err != nil {
			return err
		}
		if pair.Ceiling, err = redisCeiling(ctx, rp, fleet, o.shards, o.ceilingDuration); err != nil {
			return err
		}
		pair.Ratio = ratioOf(pair.Exact.HeartbeatsPerSecond, pair.Ceiling.MembersPerSecond)
		status("growth: %s devices: exact %s heartbeats/s, then Redis ceiling %s members/s: %.2f ×",
			num(len(ids)), num(pair.Exact.HeartbeatsPerSecond), num(pair.Ceiling.MembersPerSecond), pair.Ratio)
		gs.Pairs = append(gs.Pairs, pair)
	}
	byRatio := slices.Clone(gs.Pairs)
	sortBy(byRatio, func(p IngestPair) float64 { return p.Ratio })
	med := byRatio[len(byRatio)/2]
	gs.ExactPerSecond, gs.CeilingPerSecond, gs.RatioExact = med.Exact.HeartbeatsPerSecond, med.Ceiling.MembersPerSecond, med.Ratio
	return nil
}

// growthConfig is what shapes the flatline instances' Redis writes at a
// size: the bench's settings, the defaults behind them and -set's.
func growthConfig(o *options, size int) map[string]string {
	d := configs.Default()
	cfg := map[string]string{
		"shards.initial_count":                        fmt.Sprint(o.shards),
		"signals partitions":                          fmt.Sprint(o.partitions),
		"ingest.batch_size":                           fmt.Sprint(d.Ingest.BatchSize),
		"members per ZADD GT, a full batch's average": fmt.Sprint(d.Ingest.BatchSize / max(1, o.shards)),
		"scanner.batch_size":                          fmt.Sprint(d.Scanner.BatchSize),
		"timeouts.default, ingest runs":               growthIngestTimeout,
		"timeouts.default, lateness runs":             (120*time.Second + latenessSlack(size)).String(),
		"storm.max_hold, mass expiry":                 "0s",
	}
	maps.Copy(cfg, overrides)
	return cfg
}

// keyspaceIDs returns n ids "<prefix><number>", the number zero-padded to
// the width of largest-1 at every size, so that bytes per device compare
// like for like across sizes. They share one backing string.
func keyspaceIDs(prefix string, n, largest int) []string {
	width := len(strconv.Itoa(max(largest, n, 1) - 1))
	size := len(prefix) + width
	buf := make([]byte, n*size)
	for i := range n {
		b := buf[i*size : (i+1)*size]
		copy(b, prefix)
		for j, v := size-1, i; j >= len(prefix); j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	all := string(buf)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = all[i*size : (i+1)*size]
	}
	return ids
}

// spread returns the indexes of want devices evenly spread over n (all n
// when want is at least n).
func spread(n, want int) []int {
	want = min(want, n)
	at := make([]int, want)
	for k := range at {
		at[k] = int(int64(k) * int64(n) / int64(want))
	}
	return at
}

// restamp sets ids' deadlines to deadlineOf(k) with plain ZADDs in
// flatline's key layout: flatline writes ZADD GT, which only moves a
// deadline later.
func restamp(ctx context.Context, rdb *redis.Client, shards int, ids []string, deadlineOf func(k int) int64) error {
	keys := shard.NewKeys(keyPrefix)
	per := make([][]any, shards)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, id := range ids {
			i := shard.Of(shard.Hash(id), shards)
			if per[i] == nil {
				per[i] = []any{"zadd", keys.Deadlines(i)}
			}
			per[i] = append(per[i], shard.Score(deadlineOf(k), 0), id)
			if len(per[i]) >= 2+2*1024 {
				p.Do(ctx, per[i]...)
				per[i] = nil
			}
		}
		for _, a := range per {
			if a != nil {
				p.Do(ctx, a...)
			}
		}
		return nil
	})
	return err
}

// parseCounts reads a comma-separated list of positive counts ("100000,
// 1000000"; "_" may group digits).
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 0, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("want positive counts separated by commas, got %q", f)
		}
		out = append(out, int(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("want at least one count, got %q", s)
	}
	return out, nil
}

// countAt is counts[k], the last count beyond the list (1 for none).
func countAt(counts []int, k int) int {
	if len(counts) == 0 {
		return 1
	}
	return counts[min(k, len(counts)-1)]
}

// counts is a list of counts as parseCounts reads it.
func counts(v []int) string {
	s := make([]string, len(v))
	for k, x := range v {
		s[k] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// growthRows are the growth sweep's rows of the table.
func (g *GrowthResult) growthRows(add func(sc, measure, value, target, st string)) {
	const sc = "12 growth"
	for _, s := range g.Sizes {
		at := num(s.Devices) + " tracked: "
		if s.CeilingPerSecond > 0 {
			add(sc, at+fmt.Sprintf("Redis ceiling, ZADD GT on %s devices spread over the keyspace (median pair)", num(s.IngestDevices)), num(s.CeilingPerSecond)+" resets/s", "", "")
		}
		if len(s.Pairs) > 0 {
			var each []string
			done := true
			for _, p := range s.Pairs {
				each = append(each, fmt.Sprintf("%.2f", p.Ratio))
				done = done && p.Exact.Completed
			}
			add(sc, at+fmt.Sprintf("exact ingest of %s heartbeats of those devices / ceiling: median of %d pairs (%s)", num(s.IngestHeartbeats), len(s.Pairs), strings.Join(each, ", ")),
				fmt.Sprintf("%s hb/s; %.2f ×", num(s.ExactPerSecond), s.RatioExact), fmt.Sprintf("≥ %.1f ×", growthIngestTarget), check(done && s.RatioExact >= growthIngestTarget))
		}
		if l, t := s.Lateness, s.LatenessSparse; l != nil && t != nil {
			add(sc, at+fmt.Sprintf("lateness p99 under %s resets/s / under %s resets/s (%d and %d of %d events; other processes %.2f and %.2f cores)",
				num(l.BackgroundRate), num(t.BackgroundRate), l.Received, t.Received, l.Probes, othersCores(l.CPUSplit), othersCores(t.CPUSplit)),
				fmt.Sprintf("%s / %s ms: %.2f ×", ms(l.Lateness.P99), ms(t.Lateness.P99), s.RatioLateness), fmt.Sprintf("≤ %.0f ×", growthLatenessTarget),
				check(l.Received == l.Probes && t.Received == t.Probes && s.RatioLateness > 0 && s.RatioLateness <= growthLatenessTarget))
		}
		if m := s.Mass; m != nil {
			v := fmt.Sprintf("%s events/s (last at +%.2f s)", num(m.EventsPerSecond), m.LastSeconds)
			if !m.Completed {
				v = fmt.Sprintf("only %s by +%.0f s (%s events/s)", num(m.Unique), m.WaitedSeconds, num(m.EventsPerSecond))
			}
			add(sc, at+fmt.Sprintf("mass expiry of %s due devices on top: drain rate (other processes %.2f cores)", num(m.Devices), othersCores(m.CPUSplit)), v, "(reported)", "")
		}
		if s.BytesPerDevice > 0 {
			add(sc, at+fmt.Sprintf("Redis used_memory per device (populated through Store.Write in %.1f s, %s/s)", s.PopulateSeconds, num(s.PopulatePerSecond)),
				fmt.Sprintf("%.1f B", s.BytesPerDevice), "", "")
		}
	}
	if len(g.Sizes) > 1 && g.MemoryRatio > 0 {
		add(sc, "largest / smallest size: Redis bytes per device (1 is linear)", fmt.Sprintf("%.3f ×", g.MemoryRatio), "(reported)", "")
		add(sc, "largest / smallest size: ZADD GT ceiling; exact ingest; mass drain rate",
			fmt.Sprintf("%.2f; %.2f; %.2f ×", g.CeilingRatio, g.IngestRatio, g.DrainRatio), "(reported)", "")
	}
	if len(g.Sizes) > 0 {
		c := g.Sizes[0].Flatline
		add(sc, "flatline at every size", fmt.Sprintf("%s shards, %s partitions, ingest.batch_size %s (%s members per ZADD GT on average), scanner.batch_size %s",
			c["shards.initial_count"], c["signals partitions"], c["ingest.batch_size"], c["members per ZADD GT, a full batch's average"], c["scanner.batch_size"]), "", "")
	}
}

// othersCores is the machine's other processes' CPU seconds a second over
// a window (cpuMeter.Split): work the figures shared the cores with.
func othersCores(split map[string]float64) float64 {
	if wall := split["wall"]; wall > 0 {
		return split["others"] / wall
	}
	return 0
}
