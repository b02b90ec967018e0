package configs

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file turns YAML nodes and override strings into typed values. The
// checks are strict on purpose: a number where a duration belongs ("60"
// meaning 60ns) or a quoted number where an integer belongs is a mistake to
// report, not to guess at. Errors carry no key; the caller prefixes it.

// fromNode converts a YAML value node to a value of type t. A null value is
// the zero value (so `dead_letter_topic:` disables the dead-letter topic).
func fromNode(t reflect.Type, n *yaml.Node) (reflect.Value, error) {
	n = resolveAlias(n)
	if isNull(n) {
		return reflect.Zero(t), nil
	}
	switch t.Kind() {
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return reflect.Value{}, fmt.Errorf("want a YAML list, got %s", describe(n))
		}
		if len(n.Content) == 0 {
			return reflect.Zero(t), nil
		}
		out := reflect.MakeSlice(t, 0, len(n.Content))
		for i, item := range n.Content {
			v, err := scalarFromNode(t.Elem(), resolveAlias(item))
			if err != nil {
				return reflect.Value{}, fmt.Errorf("item %d: %w", i, err)
			}
			out = reflect.Append(out, v)
		}
		return out, nil
	case reflect.Map:
		// Handled by the caller, which knows the path of each entry.
		return reflect.Value{}, fmt.Errorf("internal error: map leaf")
	}
	return scalarFromNode(t, n)
}

func scalarFromNode(t reflect.Type, n *yaml.Node) (reflect.Value, error) {
	if n.Kind != yaml.ScalarNode {
		return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
	}
	v := reflect.New(t).Elem()
	if isNull(n) {
		return v, nil
	}
	tag := n.ShortTag()
	switch {
	case t == durationType:
		switch tag {
		case "!!str":
			d, err := time.ParseDuration(n.Value)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("invalid duration %q", n.Value)
			}
			v.SetInt(int64(d))
			return v, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err == nil && i == 0 {
				return v, nil
			}
		}
		return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
	case t.Kind() == reflect.String:
		// Any scalar is text: keep what was written, so `password: 0123`
		// stays "0123" rather than becoming the octal number 83.
		v.SetString(n.Value)
		return v, nil
	case t.Kind() == reflect.Bool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
		}
		v.SetBool(b)
		return v, nil
	case isInt(t):
		var i int64
		if tag != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
		}
		v.SetInt(i)
		return v, nil
	case isUint(t):
		var u uint64
		if tag != "!!int" || n.Decode(&u) != nil || v.OverflowUint(u) {
			return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
		}
		v.SetUint(u)
		return v, nil
	case isFloat(t):
		var f float64
		if (tag != "!!float" && tag != "!!int") || n.Decode(&f) != nil {
			return reflect.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(n))
		}
		v.SetFloat(f)
		return v, nil
	}
	return reflect.Value{}, fmt.Errorf("internal error: unsupported type %s", t)
}

// fromString converts an override (environment variable or flag) to a value
// of type t. Lists are comma-separated ("a:1,b:2"; spaces around items are
// trimmed, empty items dropped); maps are comma-separated name=value pairs.
// An empty string is an empty list or map.
func fromString(t reflect.Type, s string) (reflect.Value, error) {
	switch t.Kind() {
	case reflect.Slice:
		out := reflect.Zero(t)
		for _, item := range strings.Split(s, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			v, err := scalarFromString(t.Elem(), item)
			if err != nil {
				return reflect.Value{}, err
			}
			out = reflect.Append(out, v)
		}
		return out, nil
	case reflect.Map:
		out := reflect.Zero(t)
		for _, pair := range strings.Split(s, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			name, val, ok := strings.Cut(pair, "=")
			name, val = strings.TrimSpace(name), strings.TrimSpace(val)
			if !ok || name == "" {
				return reflect.Value{}, fmt.Errorf("want name=value pairs separated by commas, got %q", pair)
			}
			if out.IsNil() {
				out = reflect.MakeMap(t)
			}
			k := reflect.ValueOf(name).Convert(t.Key())
			if out.MapIndex(k).IsValid() {
				return reflect.Value{}, fmt.Errorf("%q given twice", name)
			}
			v, err := scalarFromString(t.Elem(), val)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("%s: %w", name, err)
			}
			out.SetMapIndex(k, v)
		}
		return out, nil
	}
	return scalarFromString(t, s)
}

func scalarFromString(t reflect.Type, s string) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	switch {
	case t == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("invalid duration %q", s)
		}
		v.SetInt(int64(d))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("want true or false, got %q", s)
		}
		v.SetBool(b)
	case isInt(t):
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(i) {
			return reflect.Value{}, fmt.Errorf("want %s, got %q", want(t), s)
		}
		v.SetInt(i)
	case isUint(t):
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v.OverflowUint(u) {
			return reflect.Value{}, fmt.Errorf("want %s, got %q", want(t), s)
		}
		v.SetUint(u)
	case isFloat(t):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("want a number, got %q", s)
		}
		v.SetFloat(f)
	default:
		return reflect.Value{}, fmt.Errorf("internal error: unsupported type %s", t)
	}
	return v, nil
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

func isUint(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func isFloat(t reflect.Type) bool {
	return t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64
}

// want names what a value of type t looks like, for error messages.
func want(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration such as "1500ms"`
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case isInt(t):
		return "an integer"
	case isUint(t):
		return "a non-negative integer"
	case isFloat(t):
		return "a number"
	case t.Kind() == reflect.Slice:
		return "a YAML list"
	case t.Kind() == reflect.Map:
		return "a YAML mapping"
	}
	return t.String()
}

// describe names what a YAML node holds, for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		if n.ShortTag() != "!!str" {
			q := strconv.Quote(v) // escapes only; 1500, 1.5 and true print as written
			return q[1 : len(q)-1]
		}
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			return "the string " + strconv.Quote(v)
		}
		return strconv.Quote(v)
	}
	return "an unsupported YAML value"
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// toNode renders v (a leaf value) as a YAML node: durations as Go duration
// strings, maps sorted by key.
func toNode(v reflect.Value) (*yaml.Node, error) {
	switch {
	case v.Type() == durationType:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: formatDuration(time.Duration(v.Int()))}, nil
	case v.Kind() == reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		for i := 0; i < v.Len(); i++ {
			item, err := toNode(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, item)
		}
		return n, nil
	case v.Kind() == reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		for _, k := range keys {
			val, err := toNode(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, val)
		}
		return n, nil
	case v.Kind() == reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}, nil
	}
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	return n, nil
}

// formatDuration writes d in the largest unit that divides it ("90s",
// "168h", "1500ms"), which reads better than time.Duration.String's
// "168h0m0s" and parses back to the same value.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	units := []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
