package tlsconf_test

import (
	"testing"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestMain fails the package's tests when a goroutine they started
// outlives them (testenv.VerifyTestMain).
func TestMain(m *testing.M) { testenv.VerifyTestMain(m) }
