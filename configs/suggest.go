package configs

import (
	"fmt"
	"strings"
)

// unknownKey is the error text for a key path that is not a key, with the
// closest known one: most unknown keys are typos.
func unknownKey(path string) string {
	if schema.groups[path] {
		return fmt.Sprintf("%q is a section, not a key; set the keys under it", path)
	}
	msg := fmt.Sprintf("unknown key %q", path)
	if s := suggest(path, knownPaths()); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// suggest returns the known name closest to name, or "" when none is close
// enough to be a plausible typo. Ties go to the alphabetically first name,
// so the suggestion does not depend on the order of known.
func suggest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if bestDist < 0 || d < bestDist || (d == bestDist && k < best) {
			best, bestDist = k, d
		}
	}
	if bestDist >= 0 && bestDist <= 2 {
		return best
	}
	// Right name, wrong section: "scanner.max_skew" -> "ingest.max_skew".
	last := name[strings.LastIndex(name, ".")+1:]
	var same []string
	for _, k := range known {
		if k[strings.LastIndex(k, ".")+1:] == last {
			same = append(same, k)
		}
	}
	if len(same) == 1 {
		return same[0]
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// knownPaths is every key and section path: a mistyped section name
// ("scaner") should be pointed at the section.
func knownPaths() []string {
	out := make([]string, 0, len(schema.leaves)+len(schema.groups))
	for _, l := range schema.leaves {
		out = append(out, l.path)
	}
	for g := range schema.groups {
		out = append(out, g)
	}
	return out
}

func knownEnv() []string {
	out := make([]string, len(schema.leaves))
	for i, l := range schema.leaves {
		out[i] = l.env
	}
	return out
}
