package kafkaconn

import (
	"strings"
	"testing"
)

// kafka.start_offset takes earliest or latest; anything else is refused
// with the key named.
func TestValidateStartOffset(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{StartEarliest: true, StartLatest: true, "": false, "newest": false, "Earliest": false} {
		c := DefaultConfig()
		c.StartOffset = v
		err := c.Validate()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "kafka.start_offset")) {
			t.Errorf("start_offset %q: Validate() = %v", v, err)
		}
	}
}
