package configs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// parseEnv reads the FLATLINE_ variables of env. Key names contain
// underscores, so a variable is matched against the known keys' variable
// names rather than split on "_". An unknown FLATLINE_ variable is a warning:
// the environment is shared with other software and may outlive a config
// key, so it must not stop the service, but a typo must not pass unseen.
func parseEnv(env []string) ([]setting, []string, error) {
	vars := make(map[string]string)
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		if _, dup := vars[name]; !dup { // the first wins, as with os.Getenv
			vars[name] = val
		}
	}
	// Sorted, so the first error and the warnings do not depend on the
	// environment's order.
	names := slices.Sorted(maps.Keys(vars))

	var out []setting
	var warnings []string
	for _, name := range names {
		l, ok := schema.byEnv[name]
		if !ok {
			w := fmt.Sprintf("environment variable %s is not a flatline setting; ignored", name)
			if s := suggest(name, knownEnv()); s != "" {
				w += fmt.Sprintf(" (did you mean %s?)", s)
			}
			warnings = append(warnings, w)
			continue
		}
		val, err := fromString(l.typ, vars[name])
		if err != nil {
			return nil, nil, fmt.Errorf("environment variable %s: %s: %v", name, l.path, err)
		}
		out = append(out, setting{leaf: l, value: val, origin: "environment variable " + name})
	}
	return out, warnings, nil
}
