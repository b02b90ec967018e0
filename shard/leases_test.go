package shard_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// RenewLeases renews, in one round trip, the leases the owner holds, and
// no other: on one server in script calls of many leases, in a cluster a
// call per lease (each shard's lease is in a slot of its own).
func TestRenewLeasesRenewsOnlyTheOwners(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) *shard.Store{
		"standalone": func(t *testing.T) *shard.Store {
			st, _ := newStore(t)
			return st
		},
		"cluster": func(t *testing.T) *shard.Store {
			st := shard.NewStore(testenv.RedisCluster(t, 3).Client(t), shard.NewKeys(testenv.Prefix(t)))
			if err := st.LoadScripts(context.Background()); err != nil {
				t.Fatal(err)
			}
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			ctx := testenv.Context(t, 60*time.Second)
			// More leases than one script call renews; every third is
			// another instance's, the last ten nobody's.
			const held, free = 600, 10
			var ids []int
			var owners []string
			var renewed []bool
			for i := range held + free {
				ids = append(ids, i)
				owner := ""
				if i < held {
					owner = "a"
					if i%3 == 1 {
						owner = "b"
					}
					if ok, err := st.AcquireLease(ctx, i, owner, time.Minute); err != nil || !ok {
						t.Fatalf("acquire %d: %v %v", i, ok, err)
					}
				}
				owners = append(owners, owner)
				renewed = append(renewed, owner == "a")
			}
			got, err := st.RenewLeases(ctx, ids, "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, renewed) {
				t.Fatalf("renewed %v, want %v", got, renewed)
			}
			after, err := st.LeaseOwners(ctx, held+free)
			if err != nil || !slices.Equal(after, owners) {
				t.Fatalf("owners after renewing: %v (%v), want them unchanged", after, err)
			}
		})
	}
}
