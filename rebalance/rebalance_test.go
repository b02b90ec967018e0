package rebalance_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
)

// After a doubling N→2N a device's shard is i or i+N, and i+N exactly when
// hash&N ≠ 0, and the layout's previous shard for it is i; halving maps i
// and i+N back to i. (That shard.Of itself doubles so, and that doublings
// compose, is shard's TestRouting.)
func TestDoublingProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 20000; trial++ {
		h := r.Uint64()
		n := 1 << r.IntN(12) // 1 … 2048
		i := shard.Of(h, n)
		l := shard.Layout{Count: 2 * n, Previous: n}
		j := l.ShardOf(h)
		if j != i && j != i+n {
			t.Fatalf("hash %x: doubling %d→%d moved shard %d to %d", h, n, 2*n, i, j)
		}
		if (j == i+n) != (h&uint64(n) != 0) {
			t.Fatalf("hash %x: moved=%v but hash&%d=%d", h, j == i+n, n, h&uint64(n))
		}
		prev, moved := l.PreviousOf(h)
		if prev != i || moved != (j != i) {
			t.Fatalf("PreviousOf(%x) = %d,%v; want %d,%v", h, prev, moved, i, j != i)
		}
		// Halving is the mirror: 2N→N maps i and i+N to i.
		half := shard.Layout{Count: n, Previous: 2 * n}
		if half.ShardOf(h) != i {
			t.Fatalf("halving: %d, want %d", half.ShardOf(h), i)
		}
	}
}

func TestCheckScale(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from shard.Layout
		to   int
		want string // "" = allowed
	}{
		{shard.Layout{Count: 16}, 32, ""},
		{shard.Layout{Count: 16}, 8, ""},
		{shard.Layout{Count: 1}, 2, ""},
		{shard.Layout{Count: 2048}, 4096, ""},
		{shard.Layout{Count: 4096}, 8192, "power of two within [1, 4096]"},
		{shard.Layout{Count: 16}, 24, "power of two"},
		{shard.Layout{Count: 16}, 64, "can only double (--to 32) or halve (--to 8)"},
		{shard.Layout{Count: 16}, 16, "can only double"},
		{shard.Layout{Count: 16}, 0, "power of two"},
		{shard.Layout{Count: 32, Previous: 16}, 64, "still in progress"},
	}
	for _, c := range cases {
		err := rebalance.CheckScale(c.from, c.to)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v → %d: %v", c.from, c.to, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v → %d: error %v, want one containing %q", c.from, c.to, err, c.want)
		}
	}
}
