package configs

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseFile reads the YAML document in data into settings. It walks the
// yaml.Node tree rather than decoding into the structs so that it can name
// the full key and line of an unknown key, a duplicate or a wrong type, and
// keep string values exactly as written.
func parseFile(name string, data []byte) ([]setting, error) {
	p := fileParser{name: name}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil // empty, or only comments
		}
		return nil, p.yamlError(err)
	}
	// A second document would be silently ignored by a decoder; an operator
	// who appended one expects it to count.
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, p.errorf(extra.Line, "holds more than one YAML document")
	case err != io.EOF:
		return nil, p.yamlError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := resolveAlias(doc.Content[0])
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errorf(root.Line, "want a mapping of keys at the top level, got %s", describe(root))
	}
	if err := p.mapping(root, ""); err != nil {
		return nil, err
	}
	return p.out, nil
}

// fileParser collects one file's settings; every error it makes starts with
// the file's name and the line at fault.
type fileParser struct {
	name string
	out  []setting
}

func (p *fileParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("config file %q: line %d: %s", p.name, line, fmt.Sprintf(format, args...))
}

// yamlError rewrites a syntax error of the YAML library, which may span
// lines, as one line under the file's name.
func (p *fileParser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.Join(strings.Fields(msg), " ")
	return fmt.Errorf("config file %q: %s", p.name, msg)
}

// mapping reads a section (prefix "" is the top level): sections recurse,
// keys become settings.
func (p *fileParser) mapping(n *yaml.Node, prefix string) error {
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errorf(k.Line, "keys must be names, got %s", describe(k))
		}
		// A merge key would set keys that appear on no line of their own,
		// so neither errors nor origins could point at them.
		if k.ShortTag() == "!!merge" {
			return p.errorf(k.Line, "YAML merge keys (<<) are not supported")
		}
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			return p.errorf(k.Line, "duplicate key %q (first at line %d)", path, first)
		}
		seen[k.Value] = k.Line

		if schema.groups[path] {
			v = resolveAlias(v)
			if isNull(v) {
				continue // a section with every key commented out
			}
			if v.Kind != yaml.MappingNode {
				return p.errorf(v.Line, "%s: want a mapping of keys, got %s", path, describe(v))
			}
			if err := p.mapping(v, path); err != nil {
				return err
			}
			continue
		}
		l, ok := schema.byPath[path]
		if !ok {
			return p.errorf(k.Line, "%s", unknownKey(path))
		}
		v = resolveAlias(v)
		val, err := p.value(l, v)
		if err != nil {
			return err
		}
		p.out = append(p.out, setting{leaf: l, value: val, origin: fmt.Sprintf("config file %q, line %d", p.name, v.Line)})
	}
	return nil
}

func (p *fileParser) value(l *leaf, v *yaml.Node) (reflect.Value, error) {
	if l.typ.Kind() == reflect.Map && !isNull(v) {
		return p.mapValue(l, v)
	}
	val, err := fromNode(l.typ, v)
	if err != nil {
		return reflect.Value{}, p.errorf(v.Line, "%s: %v", l.path, err)
	}
	return val, nil
}

// mapValue reads a map key (timeouts.classes) here rather than in fromNode:
// its names are the user's, so each entry's error carries the entry's own
// line and name, and a duplicate name is caught.
func (p *fileParser) mapValue(l *leaf, v *yaml.Node) (reflect.Value, error) {
	if v.Kind != yaml.MappingNode {
		return reflect.Value{}, p.errorf(v.Line, "%s: want a YAML mapping of name: %s, got %s", l.path, strings.TrimPrefix(want(l.typ.Elem()), "a "), describe(v))
	}
	out := reflect.Zero(l.typ) // {} stays nil, as no map at all
	seen := make(map[string]int)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, e := resolveAlias(v.Content[i]), resolveAlias(v.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return reflect.Value{}, p.errorf(k.Line, "%s: names must be strings, got %s", l.path, describe(k))
		}
		entry := entryPath(l.path, k.Value)
		if first, dup := seen[k.Value]; dup {
			return reflect.Value{}, p.errorf(k.Line, "duplicate key %s (first at line %d)", entry, first)
		}
		seen[k.Value] = k.Line
		ev, err := scalarFromNode(l.typ.Elem(), e)
		if err != nil {
			return reflect.Value{}, p.errorf(e.Line, "%s: %v", entry, err)
		}
		if out.IsNil() {
			out = reflect.MakeMap(l.typ)
		}
		out.SetMapIndex(reflect.ValueOf(k.Value).Convert(l.typ.Key()), ev)
	}
	return out, nil
}

// entryPath names a map entry in errors: timeouts.classes.sensor, or
// timeouts.classes["odd name"] when the name would not read as a key.
func entryPath(path, name string) string {
	if name != "" && strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return path + "." + name
	}
	return fmt.Sprintf("%s[%q]", path, name)
}
