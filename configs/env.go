package configs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// parseEnv reads the FLATLINE_ variables of env. Key names contain
// underscores, so a variable is matched against the known keys' variable
// names rather than split on "_".
//
// An unknown FLATLINE_ variable is a warning unless strict: the environment
// is shared with other software and may outlive a config key (a rollback to
// a version without the key), so it must not stop a running service, but a
// typo must not pass unseen. strict (config validate, the check before a
// deploy, where failing costs nothing) makes it an error naming every such
// variable. Variables Kubernetes injects for a Service are neither
// (isServiceLink).
func parseEnv(env []string, strict bool) ([]setting, []string, error) {
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
	var unknown []struct{ name, hint string }
	for _, name := range names {
		l, ok := schema.byEnv[name]
		if !ok {
			if isServiceLink(name, vars[name]) {
				continue
			}
			var hint string
			if s := suggest(name, knownEnv()); s != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", s)
			}
			unknown = append(unknown, struct{ name, hint string }{name, hint})
			warnings = append(warnings, fmt.Sprintf("environment variable %s is not a flatline setting; ignored%s", name, hint))
			continue
		}
		val, err := fromString(l.typ, vars[name])
		if err != nil {
			return nil, nil, fmt.Errorf("environment variable %s: %s: %v", name, l.path, err)
		}
		out = append(out, setting{leaf: l, value: val, origin: "environment variable " + name})
	}
	if strict && len(unknown) > 0 {
		if len(unknown) == 1 {
			return nil, nil, fmt.Errorf("environment variable %s is not a flatline setting%s", unknown[0].name, unknown[0].hint)
		}
		list := make([]string, len(unknown))
		for k, u := range unknown {
			list[k] = u.name + u.hint
		}
		return nil, nil, fmt.Errorf("environment variables %s are not flatline settings", strings.Join(list, ", "))
	}
	return out, warnings, nil
}
