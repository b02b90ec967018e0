package configs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// parseSet reads flag overrides (LoadOptions.Set). Unlike the environment,
// an unknown key here is an error: someone typed it on this very command
// line.
func parseSet(set map[string]string) ([]setting, error) {
	var out []setting
	for _, k := range slices.Sorted(maps.Keys(set)) { // the first error must not depend on map order
		l, ok := schema.byPath[k]
		if !ok {
			return nil, errors.New(unknownKey(k))
		}
		val, err := fromString(l.typ, set[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out = append(out, setting{leaf: l, value: val, origin: "the command line"})
	}
	return out, nil
}
