package shard_test

import (
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// A child costs at most its parent's id + 64 B more in Redis (SPEC §14),
// however long its own id: 65,600 children with 36-byte ids under gateways
// with 10-byte ids in one shard's parents HASH, a count just past a
// doubling of the hash table, its costliest (72 B each on Redis 7.0; 56 B
// at 131,000).
func TestAChildCostsItsParentsIDAndLittleMore(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	const n, parentLen = 131000, 10
	var b shard.Batch
	b.Reset(1)
	for k := range n {
		b.SetParent(0, fmt.Sprintf("%08x-0000-4000-8000-%012x", k, k), fmt.Sprintf("gw-%07d", k/100), 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	used, err := st.Client().MemoryUsage(ctx, st.Keys().Parents(0), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(used) / n; per > parentLen+64 {
		t.Errorf("%.1f B per child, want at most %d (its parent's id + 64 B)", per, parentLen+64)
	} else {
		t.Logf("%.1f B per child", per)
	}
	if p, err := st.ParentOf(ctx, 0, fmt.Sprintf("%08x-0000-4000-8000-%012x", 7, 7)); err != nil || p != "gw-0000000" {
		t.Errorf("parent of child 7: %q, %v", p, err)
	}
}
