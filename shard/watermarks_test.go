package shard_test

import (
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// The firing watermark is the minimum over every partition ingest
// recorded; one without a watermark yet holds it at 0.
func TestMinWatermark(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wms        map[int]int64
		partitions int
		want       int64
		ok         bool
	}{
		{nil, 0, 0, false},
		{map[int]int64{0: 5}, 0, 0, false},
		{map[int]int64{0: 5, 1: 3, 2: 9}, 3, 3, true},
		{map[int]int64{0: 5, 2: 9}, 3, 0, true},
		{map[int]int64{0: 5, 1: 3, 7: 1}, 2, 3, true},
	} {
		if got, ok := shard.MinWatermark(c.wms, c.partitions); got != c.want || ok != c.ok {
			t.Errorf("MinWatermark(%v, %d) = %d, %v; want %d, %v", c.wms, c.partitions, got, ok, c.want, c.ok)
		}
	}
}
