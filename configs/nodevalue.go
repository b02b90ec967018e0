package configs

import (
	"fmt"
	"reflect"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// fromNode converts a YAML value node to a value of type t, a scalar or a
// list; map keys are read by fileParser.mapValue, which knows each entry's
// line. A null value is the zero value (so `dead_letter_topic:` disables the
// dead-letter topic). Errors carry no key; the caller prefixes it.
func fromNode(t reflect.Type, n *yaml.Node) (reflect.Value, error) {
	n = resolveAlias(n)
	if isNull(n) {
		return reflect.Zero(t), nil
	}
	if t.Kind() != reflect.Slice {
		return scalarFromNode(t, n)
	}
	if n.Kind != yaml.SequenceNode {
		return reflect.Value{}, mismatch(t, n)
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
}

// scalarFromNode converts a YAML scalar to t, strictly: a value must
// already be of t's YAML type. A bare number where a duration belongs (60,
// which would be 60ns) or a quoted "20" where an integer belongs is a
// mistake to report, not to guess at.
func scalarFromNode(t reflect.Type, n *yaml.Node) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	if n.Kind != yaml.ScalarNode {
		return reflect.Value{}, mismatch(t, n)
	}
	if isNull(n) {
		return v, nil
	}
	tag := n.ShortTag()
	switch {
	case t.Kind() == reflect.String:
		// Any scalar is text: keep what was written, so `password: 0123`
		// stays "0123" rather than becoming the octal number 83.
		v.SetString(n.Value)
		return v, nil
	case t == durationType && tag == "!!str":
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("invalid duration %q", n.Value)
		}
		v.SetInt(int64(d))
		return v, nil
	case t == durationType:
		// 0 is the one number that needs no unit.
		var i int64
		if tag == "!!int" && n.Decode(&i) == nil && i == 0 {
			return v, nil
		}
	case t.Kind() == reflect.Float64 && (tag == "!!float" || tag == "!!int") && n.Decode(v.Addr().Interface()) == nil:
		// A fraction may be written 0.01 or 1.
		return v, nil
	case tag == yamlTag(t) && n.Decode(v.Addr().Interface()) == nil:
		// The YAML library parses the bool or integer; it refuses an
		// integer that overflows t.
		return v, nil
	}
	return reflect.Value{}, mismatch(t, n)
}

// yamlTag is the resolved YAML tag a scalar must have to be a bool or an
// integer, the non-string scalar types checkLeafType admits.
func yamlTag(t reflect.Type) string {
	if t.Kind() == reflect.Bool {
		return "!!bool"
	}
	return "!!int"
}

func mismatch(t reflect.Type, n *yaml.Node) error {
	return fmt.Errorf("want %s, got %s", want(t), describe(n))
}

// describe names what a YAML node holds, for errors: a value as written,
// and "the string" when quotes made a number or bool text.
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

// resolveAlias follows an alias to the node it names, so *t reads as the
// value anchored &t. The bound keeps a malformed node tree from looping.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}
