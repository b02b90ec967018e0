package shard_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// RenewLeases renews, in one round trip, the leases the owner holds, and
// no other.
func TestRenewLeasesRenewsOnlyTheOwners(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := testenv.Context(t, 30*time.Second)
	for i, owner := range []string{"a", "b", "a"} {
		if ok, err := st.AcquireLease(ctx, i, owner, time.Minute); err != nil || !ok {
			t.Fatalf("acquire %d: %v %v", i, ok, err)
		}
	}
	renewed, err := st.RenewLeases(ctx, []int{0, 1, 2, 3}, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(renewed, []bool{true, false, true, false}) {
		t.Fatalf("renewed %v, want [true false true false]", renewed)
	}
	owners, err := st.LeaseOwners(ctx, 4)
	if err != nil || !slices.Equal(owners, []string{"a", "b", "a", ""}) {
		t.Fatalf("owners %v (%v), want [a b a \"\"]", owners, err)
	}
}
