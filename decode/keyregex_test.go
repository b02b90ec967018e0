package decode

import (
	"regexp"
	"testing"
)

// segmentExprs are regexes of key:<regex>: those of the fast form and
// those that must go to regexp.
var segmentExprs = []struct {
	expr string
	fast bool
}{
	{`^devices/([^/]+)/`, true},
	{`^devices/([^/]+)`, true},
	{`^([^/]+)/`, true},
	{`^devices/([^/]+)/up$`, true},
	{`^devices/([^/]+)$`, true},
	{`^spBv1\.0/([^/]+)/`, true},
	{`^a([^/]+)b`, false},            // the suffix does not start at the separator: backtracking matters
	{`devices/([^/]+)/`, false},      // unanchored
	{`^devices/([^/]*)/`, false},     // zero or more
	{`^devices/([^/]+?)/`, false},    // non-greedy
	{`^(?i)devices/([^/]+)/`, false}, // case folding
	{`^devices/([^/]+)/(.*)`, false},
	{`^dévices/([^/]+)/`, false}, // not ASCII
	{`^devices/([^é]+)/`, false},
	{`^devices/(\w+)/`, false},
	{`^(?:devices|dev)/([^/]+)/`, false},
}

var segmentKeys = []string{
	"devices/d-42/up", "devices/d-42/", "devices/d-42", "devices//up", "devices/", "devices", "", "/up",
	"d-42/up", "sensors/d-42/up", "devices/d-42/up/more", "devices/d\xff/up", "devices/\n/x", "devices/a/b/c",
	"spBv1.0/group/NDATA/node", "spBv1x0/group/", "Devices/d-42/up", "devices/dévice/up", "ab", "axyb", "abb",
}

// TestSegmentMatchAgreesWithRegexp: the fast matcher takes exactly the
// regexes of its form, and on them finds what regexp finds.
func TestSegmentMatchAgreesWithRegexp(t *testing.T) {
	t.Parallel()
	for _, e := range segmentExprs {
		m := compileSegment(e.expr)
		if (m != nil) != e.fast {
			t.Errorf("%s: fast matcher %v, want %v", e.expr, m != nil, e.fast)
			continue
		}
		if m == nil {
			continue
		}
		re := regexp.MustCompile(e.expr)
		for _, k := range segmentKeys {
			checkSegment(t, e.expr, re, m, []byte(k))
		}
	}
}

func checkSegment(t *testing.T, expr string, re *regexp.Regexp, m *segmentMatch, key []byte) {
	t.Helper()
	loc := re.FindSubmatchIndex(key)
	start, end, ok := m.match(key)
	switch {
	case ok != (loc != nil):
		t.Errorf("%s on %q: fast match %v, regexp %v", expr, key, ok, loc != nil)
	case ok && (start != loc[2] || end != loc[3]):
		t.Errorf("%s on %q: fast capture [%d:%d], regexp [%d:%d]", expr, key, start, end, loc[2], loc[3])
	}
}

// FuzzSegmentMatch checks the fast matcher against regexp on any key, for
// every regex of the fast form in segmentExprs.
func FuzzSegmentMatch(f *testing.F) {
	for _, k := range segmentKeys {
		f.Add([]byte(k))
	}
	type pair struct {
		expr string
		re   *regexp.Regexp
		m    *segmentMatch
	}
	var fast []pair
	for _, e := range segmentExprs {
		if m := compileSegment(e.expr); m != nil {
			fast = append(fast, pair{e.expr, regexp.MustCompile(e.expr), m})
		}
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, p := range fast {
			checkSegment(t, p.expr, p.re, p.m, key)
		}
	})
}
