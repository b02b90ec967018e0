// Command zadd-order measures what redis-server spends per member of a
// ZADD GT depending on the order the members reach it: the question behind
// the bench's "redis-server CPU per reset: exact / the bare ZADD GT
// ceiling" row, where flatline's writes cost Redis more per member than the
// ceiling's although both send variadic ZADD GTs of ~256 pairs.
//
// It replays, each on an emptied redis-server of its own (on a free port),
// pipelined 16 commands deep on one connection so that nothing else shares
// the cores:
//
//   - captured: the ZADDs of an exact ingest run as MONITOR saw them
//     (flatline-bench -scenarios ingest -monitor FILE), in their order;
//   - in step: the same commands, stably sorted by the second their first
//     score falls in, as if every partition were read in step instead of
//     each at its own pace through the backlog;
//   - each sorted: the commands as captured, each one's pairs sorted by
//     score (what sorting a batch's commands before writing would give);
//   - time order: the same pairs sorted by score, 256 to a command of
//     their key, as a live fleet's heartbeats read in the order they were
//     sent would reach Redis;
//   - ceiling order: the same members and as many rounds, in the order the
//     bench's ceiling sends them — per shard key in device order, 256 pairs
//     and one score a command.
//
// and prints INFO commandstats' zadd µs per member for each, -reps times.
//
//	bin/flatline-bench -scenarios ingest -ingest-pairs 1 -coalesce 0 -out "" -monitor /tmp/zadds.txt
//	go run ./bench/cmd/zadd-order -monitor /tmp/zadds.txt
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
)

func main() {
	file := flag.String("monitor", "", "a MONITOR capture (flatline-bench -monitor)")
	reps := flag.Int("reps", 3, "replays of each order")
	flag.Parse()
	if err := run(*file, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "zadd-order:", err)
		os.Exit(1)
	}
}

func run(file string, reps int) error {
	if file == "" {
		return errors.New("-monitor: a MONITOR capture is required")
	}
	captured, err := readZadds(file)
	if err != nil {
		return err
	}
	if len(captured) == 0 {
		return fmt.Errorf("-monitor: no ZADD in %s", file)
	}
	ctx := context.Background()
	rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	orders := []struct {
		name string
		cmds [][]string
	}{
		{"captured", captured},
		{"in step", inStep(captured)},
		{"each sorted", eachSorted(captured)},
		{"time order", timeOrder(captured)},
		{"ceiling order", ceilingOrder(captured)},
	}
	fmt.Printf("%d ZADD commands, %d members\n", len(captured), members(captured))
	for _, o := range orders {
		for r := 0; r < reps; r++ {
			us, err := replay(ctx, rdb, o.cmds)
			if err != nil {
				return fmt.Errorf("%s: %w", o.name, err)
			}
			fmt.Printf("%-14s zadd %.2f µs per member\n", o.name, us)
		}
	}
	return nil
}

// readZadds returns the ZADD commands of a MONITOR capture, each as its
// arguments: ZADD, key, GT, then score, member pairs.
func readZadds(file string) ([][]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("-monitor: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var out [][]string
	for sc.Scan() {
		args := monitorArgs(sc.Text())
		if len(args) >= 5 && strings.EqualFold(args[0], "zadd") && strings.EqualFold(args[2], "gt") && len(args)%2 == 1 {
			out = append(out, args)
		}
	}
	return out, sc.Err()
}

// monitorArgs splits a MONITOR line (`<time> [<db> <client>] "arg" "arg" …`)
// into its unquoted arguments; nil when it is not one.
func monitorArgs(line string) []string {
	i := strings.Index(line, "] ")
	if i < 0 {
		return nil
	}
	var out []string
	s := line[i+2:]
	for len(s) > 0 {
		if s[0] == ' ' {
			s = s[1:]
			continue
		}
		if s[0] != '"' {
			return nil
		}
		var b strings.Builder
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			b.WriteByte(s[j])
		}
		if j >= len(s) {
			return nil
		}
		out = append(out, b.String())
		s = s[j+1:]
	}
	return out
}

func members(cmds [][]string) int {
	n := 0
	for _, c := range cmds {
		n += (len(c) - 3) / 2
	}
	return n
}

// second is the second of a command's first score: a score's deadline in
// ms sits above its 12 bits of metadata (shard.Score).
func second(c []string) int64 {
	v, _ := strconv.ParseInt(c[3], 10, 64)
	return (v >> 12) / 1000
}

func inStep(cmds [][]string) [][]string {
	out := slices.Clone(cmds)
	slices.SortStableFunc(out, func(a, b []string) int { return int(second(a) - second(b)) })
	return out
}

// timeOrder sends the pairs of cmds in score order, each key's next 256 in
// one command.
func timeOrder(cmds [][]string) [][]string {
	var pairs []pair
	for _, c := range cmds {
		pairs = appendPairs(pairs, c)
	}
	sortByScore(pairs)
	pending := map[string][]string{}
	var out [][]string
	for _, p := range pairs {
		c := pending[p.key]
		if c == nil {
			c = []string{"zadd", p.key, "gt"}
		}
		c = append(c, p.score, p.id)
		if len(c) == 3+2*256 {
			out = append(out, c)
			c = nil
		}
		pending[p.key] = c
	}
	keys := make([]string, 0, len(pending))
	for k, c := range pending {
		if c != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, pending[k])
	}
	return out
}

// ceilingOrder sends every member of cmds as often as cmds does, the way
// the bench's ceiling does: per key in member order, 256 pairs a command,
// one score a command, rising.
func ceilingOrder(cmds [][]string) [][]string {
	count := map[string]map[string]int{}
	for _, c := range cmds {
		m := count[c[1]]
		if m == nil {
			m = map[string]int{}
			count[c[1]] = m
		}
		for k := 4; k < len(c); k += 2 {
			m[c[k]]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sorted := map[string][]string{}
	rounds := 0
	for _, k := range keys {
		for id, n := range count[k] {
			sorted[k] = append(sorted[k], id)
			rounds = max(rounds, n)
		}
		slices.Sort(sorted[k])
	}
	first, _ := strconv.ParseInt(cmds[0][3], 10, 64)
	score := first
	var out [][]string
	for r := 0; r < rounds; r++ {
		for _, k := range keys {
			ids := sorted[k]
			for from := 0; from < len(ids); from += 256 {
				score += 1 << 12 // one ms later a command
				s := strconv.FormatInt(score, 10)
				c := []string{"zadd", k, "gt"}
				for _, id := range ids[from:min(from+256, len(ids))] {
					if count[k][id] > r {
						c = append(c, s, id)
					}
				}
				if len(c) > 3 {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// replay empties Redis, sends cmds 16 to a pipeline and returns
// commandstats' zadd µs per member.
func replay(ctx context.Context, rdb *redis.Client, cmds [][]string) (float64, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, err
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, err
	}
	args := make([][]any, len(cmds))
	for k, c := range cmds {
		args[k] = make([]any, len(c))
		for j, a := range c {
			args[k][j] = a
		}
	}
	for i := 0; i < len(args); i += 16 {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, a := range args[i:min(i+16, len(args))] {
				p.Do(ctx, a...)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	usec, err := zaddUsec(ctx, rdb)
	if err != nil {
		return 0, err
	}
	return float64(usec) / float64(members(cmds)), nil
}

func zaddUsec(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_zadd:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return 0, errors.New("no zadd in INFO commandstats")
}

// startRedis starts a redis-server of its own on a free port, with nothing
// saved to disk (testenv.StartRedis), and a client of it.
func startRedis() (*redis.Client, func(), error) {
	srv, err := testenv.StartRedis()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	return rdb, func() { _ = rdb.Close(); srv.Close() }, nil
}

// eachSorted keeps the commands as captured, each one's pairs sorted by score.
func eachSorted(cmds [][]string) [][]string {
	out := make([][]string, len(cmds))
	for i, c := range cmds {
		ps := appendPairs(nil, c)
		sortByScore(ps)
		n := slices.Clone(c[:3])
		for _, p := range ps {
			n = append(n, p.score, p.id)
		}
		out[i] = n
	}
	return out
}

// pair is one score and member of a ZADD, with its key and its score as a
// number.
type pair struct {
	key, score, id string
	v              int64
}

// appendPairs appends the pairs of the ZADD c (ZADD, key, GT, then score,
// member pairs).
func appendPairs(ps []pair, c []string) []pair {
	for k := 3; k+1 < len(c); k += 2 {
		v, _ := strconv.ParseInt(c[k], 10, 64)
		ps = append(ps, pair{c[1], c[k], c[k+1], v})
	}
	return ps
}

// sortByScore sorts ps by score, keeping the order of equal ones.
func sortByScore(ps []pair) {
	slices.SortStableFunc(ps, func(a, b pair) int { return cmp.Compare(a.v, b.v) })
}
