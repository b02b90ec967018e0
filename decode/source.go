package decode

import (
	"fmt"
	"regexp"
	"strings"
)

// From says where each field of a heartbeat comes from: one source
// expression per field (the ingest.from section).
//
//	key              the Kafka key (device_id only)
//	key:<regex>      the first capture group of the regex on the key (device_id only)
//	header:<name>    a record header: UTF-8 text, or an AMQP-typed value
//	value:<path>     a member of the record's JSON (or Avro) value; path = keys joined by dots
//	payload:<path>   a member of the JSON payload embedded in the value (see Config.Payload)
//	kafka            the record timestamp (ts only)
//	""               none (class, timeout_ms, parent)
type From struct {
	// DeviceID: key, key:<regex>, header:<name>, value:<path> or
	// payload:<path>. Default: key.
	DeviceID string `config:"device_id"`
	// TS, the device's event time: value:<path>, payload:<path>,
	// header:<name> or kafka. Default: value:ts.
	TS string `config:"ts"`
	// Class: value:<path>, payload:<path>, header:<name> or "". Default:
	// value:class.
	Class string `config:"class"`
	// TimeoutMS: value:<path>, payload:<path>, header:<name> or "".
	// Default: value:timeout_ms.
	TimeoutMS string `config:"timeout_ms"`
	// Parent, the device's gateway: value:<path>, payload:<path>,
	// header:<name> or "". Default: value:parent.
	Parent string `config:"parent"`
}

// DefaultFrom returns the expressions that read the native shape (the
// README's "Messages").
func DefaultFrom() From {
	return From{DeviceID: "key", TS: "value:ts", Class: "value:class", TimeoutMS: "value:timeout_ms", Parent: "value:parent"}
}

// sourceKind is where a field comes from.
type sourceKind uint8

const (
	srcNone sourceKind = iota
	srcKey
	srcKeyRegex
	srcHeader
	srcValue
	srcPayload
	srcKafka
)

// source is a parsed source expression.
type source struct {
	kind   sourceKind
	path   []string       // value:, payload:
	header string         // header:
	re     *regexp.Regexp // key:<regex>
	seg    *segmentMatch  // key:<regex> of the common form, matched without regexp
}

// fromValue reports whether the field is read from the value or the payload.
func (s source) fromValue() bool { return s.kind == srcValue || s.kind == srcPayload }

// field names the ingest.from key and what its expressions may be.
type field struct {
	name  string
	kinds []sourceKind
}

var (
	fieldDeviceID  = field{"device_id", []sourceKind{srcKey, srcKeyRegex, srcHeader, srcValue, srcPayload}}
	fieldTS        = field{"ts", []sourceKind{srcValue, srcPayload, srcHeader, srcKafka}}
	fieldClass     = field{"class", []sourceKind{srcValue, srcPayload, srcHeader, srcNone}}
	fieldTimeoutMS = field{"timeout_ms", []sourceKind{srcValue, srcPayload, srcHeader, srcNone}}
	fieldParent    = field{"parent", []sourceKind{srcValue, srcPayload, srcHeader, srcNone}}
)

// parseSource parses one expression of ingest.from.<f.name>. Errors are one
// line naming the key.
func parseSource(f field, expr string) (source, error) {
	key := "ingest.from." + f.name
	var s source
	prefix, arg, hasArg := strings.Cut(expr, ":")
	switch {
	case expr == "":
		s.kind = srcNone
	case expr == "key":
		s.kind = srcKey
	case expr == "kafka":
		s.kind = srcKafka
	case hasArg && prefix == "key":
		re, err := regexp.Compile(arg)
		if err != nil {
			return s, fmt.Errorf("%s: %q: the regex does not compile: %v", key, expr, err)
		}
		if re.NumSubexp() < 1 {
			return s, fmt.Errorf("%s: %q: the regex needs a capture group, e.g. key:^devices/([^/]+)/", key, expr)
		}
		s.kind, s.re, s.seg = srcKeyRegex, re, compileSegment(arg)
	case hasArg && prefix == "header":
		if arg == "" {
			return s, fmt.Errorf("%s: %q: header: needs a header name", key, expr)
		}
		s.kind, s.header = srcHeader, arg
	case hasArg && (prefix == "value" || prefix == "payload"):
		path := strings.Split(arg, ".")
		for _, p := range path {
			if p == "" {
				return s, fmt.Errorf("%s: %q: a path is keys joined by dots, with no empty key", key, expr)
			}
		}
		s.kind, s.path = srcValue, path
		if prefix == "payload" {
			s.kind = srcPayload
		}
	default:
		return s, fmt.Errorf("%s: %q: want key, key:<regex>, header:<name>, value:<path>, payload:<path>, kafka or \"\"", key, expr)
	}
	for _, k := range f.kinds {
		if k == s.kind {
			return s, nil
		}
	}
	return s, fmt.Errorf("%s: %q is not a source of %s; it takes %s", key, expr, f.name, kindList(f.kinds))
}

func kindList(kinds []sourceKind) string {
	names := map[sourceKind]string{srcNone: `""`, srcKey: "key", srcKeyRegex: "key:<regex>", srcHeader: "header:<name>",
		srcValue: "value:<path>", srcPayload: "payload:<path>", srcKafka: "kafka"}
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = names[k]
	}
	return strings.Join(out, ", ")
}
