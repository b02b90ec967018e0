package configs

import (
	"regexp"
	"strings"
)

// Kubernetes injects, for every Service in a pod's namespace (unless the pod
// sets enableServiceLinks: false, as flatline's chart does), variables named
// after the Service: a Service "flatline" or "flatline-redis" gives
// FLATLINE_SERVICE_HOST, FLATLINE_REDIS_PORT=tcp://10.0.0.7:6379 and so on.
// They share flatline's prefix without being meant for it, so they are
// neither a warning nor, for `config validate`, an error. Both the name and
// the value must have the injected shape: FLATLINE_HTTP_PORT=9464 is a
// mistaken setting, FLATLINE_HTTP_PORT=tcp://10.0.0.7:9464 is a link.
var serviceLinkForms = []struct {
	name, value *regexp.Regexp
}{
	{regexp.MustCompile(`^[A-Z0-9_]+_SERVICE_HOST$`), regexp.MustCompile(`^\S+$`)},
	{regexp.MustCompile(`^[A-Z0-9_]+_SERVICE_PORT(_[A-Z0-9_]+)?$`), regexp.MustCompile(`^[0-9]+$`)},
	{regexp.MustCompile(`^[A-Z0-9_]+_PORT(_[0-9]+_(TCP|UDP|SCTP))?$`), regexp.MustCompile(`^(tcp|udp|sctp)://\S+:[0-9]+$`)},
	{regexp.MustCompile(`^[A-Z0-9_]+_PORT_[0-9]+_(TCP|UDP|SCTP)_PROTO$`), regexp.MustCompile(`^(tcp|udp|sctp)$`)},
	{regexp.MustCompile(`^[A-Z0-9_]+_PORT_[0-9]+_(TCP|UDP|SCTP)_PORT$`), regexp.MustCompile(`^[0-9]+$`)},
	{regexp.MustCompile(`^[A-Z0-9_]+_PORT_[0-9]+_(TCP|UDP|SCTP)_ADDR$`), regexp.MustCompile(`^\S+$`)},
}

// isServiceLink reports whether the variable name=value has the shape of
// one Kubernetes injects for a Service (see serviceLinkForms).
func isServiceLink(name, value string) bool {
	if !strings.HasPrefix(name, envPrefix) {
		return false
	}
	for _, f := range serviceLinkForms {
		if f.name.MatchString(name) && f.value.MatchString(value) {
			return true
		}
	}
	return false
}
