package main

import (
	"slices"
	"testing"
)

func TestMonitorArgs(t *testing.T) {
	line := `1795473973.036745 [0 127.0.0.1:47210] "zadd" "flatline:{5}:deadlines" "gt" "374402338082816" "dev-\"q\"" "374402338086912" "dev-000158"`
	got := monitorArgs(line)
	want := []string{"zadd", "flatline:{5}:deadlines", "gt", "374402338082816", `dev-"q"`, "374402338086912", "dev-000158"}
	if !slices.Equal(got, want) {
		t.Fatalf("monitorArgs = %q, want %q", got, want)
	}
	if got := monitorArgs(`OK`); got != nil {
		t.Fatalf("monitorArgs(OK) = %q, want nil", got)
	}
	if got := monitorArgs(`1.0 [0 x] "zadd" "cut`); got != nil {
		t.Fatalf("a line cut off mid-argument: %q, want nil", got)
	}
}

// The ceiling order sends each key's members as often as the capture did,
// in member order, one rising score a command.
func TestCeilingOrderKeepsTheMembers(t *testing.T) {
	score := func(s int64) string { return string(rune('0'+s)) + "000000000000" }
	cmds := [][]string{
		{"zadd", "k1", "gt", score(1), "b", score(1), "a"},
		{"zadd", "k2", "gt", score(1), "c"},
		{"zadd", "k1", "gt", score(2), "a", score(2), "b"},
	}
	out := ceilingOrder(cmds)
	if members(out) != members(cmds) {
		t.Fatalf("ceiling order sends %d members, the capture %d", members(out), members(cmds))
	}
	if !slices.Equal(out[0][3:], []string{out[0][3], "a", out[0][3], "b"}) || out[0][1] != "k1" {
		t.Fatalf("first command %q: want k1's members a, b under one score", out[0])
	}
	seen := map[string]bool{}
	for _, c := range out {
		if seen[c[3]] {
			t.Fatalf("score %s used by two commands", c[3])
		}
		seen[c[3]] = true
	}
}

// Time order sends every pair once, by score, each command one key's.
func TestTimeOrderSortsByScore(t *testing.T) {
	cmds := [][]string{
		{"zadd", "k1", "gt", "30", "c", "10", "a"},
		{"zadd", "k2", "gt", "20", "b"},
		{"zadd", "k1", "gt", "40", "d"},
	}
	out := timeOrder(cmds)
	if members(out) != members(cmds) {
		t.Fatalf("time order sends %d members, the capture %d", members(out), members(cmds))
	}
	var k1 []string
	for _, c := range out {
		if c[1] == "k1" {
			k1 = append(k1, c[3:]...)
		}
	}
	if want := []string{"10", "a", "30", "c", "40", "d"}; !slices.Equal(k1, want) {
		t.Fatalf("k1's pairs %q, want %q", k1, want)
	}
}

// Each sorted keeps the commands and their order, each one's pairs by score.
func TestEachSortedSortsWithinCommands(t *testing.T) {
	cmds := [][]string{
		{"zadd", "k1", "gt", "30", "c", "10", "a", "20", "b"},
		{"zadd", "k2", "gt", "5", "z"},
	}
	out := eachSorted(cmds)
	want := [][]string{
		{"zadd", "k1", "gt", "10", "a", "20", "b", "30", "c"},
		{"zadd", "k2", "gt", "5", "z"},
	}
	if !slices.EqualFunc(out, want, slices.Equal[[]string]) {
		t.Fatalf("eachSorted = %q, want %q", out, want)
	}
	if cmds[0][3] != "30" {
		t.Fatal("eachSorted changed the capture")
	}
}
