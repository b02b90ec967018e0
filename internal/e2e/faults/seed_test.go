package faults_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// seed returns the random seed of a test: FLATLINE_FAULTS_SEED when set (to
// replay a failure), else a fresh one. It is logged either way.
func seed(t *testing.T) *rand.Rand {
	t.Helper()
	s := rand.Uint64()
	if v := os.Getenv("FLATLINE_FAULTS_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("FLATLINE_FAULTS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with FLATLINE_FAULTS_SEED=%d)", s, s)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}
