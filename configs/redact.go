package configs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flatline-dev/flatline/internal/confcheck"
)

// redacted replaces a secret that is set.
const redacted = "<redacted>"

// secretKeys are the keys whose values Redacted hides. The stage packages
// own their structs, so the list lives here rather than in a struct tag.
// The password_file keys are not among them: they hold where a secret is,
// not the secret (read only when a client is built, never into a printed
// field), and a hidden path would keep the output from loading back.
var secretKeys = map[string]bool{
	"redis.password":                  true,
	"redis.sentinel.password":         true,
	"kafka.sasl.password":             true,
	"ingest.schema_registry.password": true,
}

// Redacted returns the effective configuration as YAML, keys in the order of
// flatline.yaml, with every secret that is set (redis.password,
// kafka.sasl.password) replaced by "<redacted>": `flatline config print`.
// The output loads back as a configuration file.
func (c *Config) Redacted() ([]byte, error) {
	root, err := c.node("")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RedactedJSON is Redacted as one JSON document, for `flatline config print
// -o json`: the same keys in the same order, durations as the same strings
// ("90s"), secrets redacted alike.
func (c *Config) RedactedJSON() ([]byte, error) {
	root, err := c.node("")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := nodeJSON(&buf, root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// nodeJSON writes a node made by node or toNode as JSON. It walks the nodes
// rather than decoding the YAML into maps so that the keys keep
// flatline.yaml's order.
func nodeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := nodeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := nodeJSON(buf, item); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", n.Value, err)
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			v = n.Value // JSON has no infinity
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(b)
	default:
		return fmt.Errorf("unexpected YAML node kind %v", n.Kind)
	}
	return nil
}

// node renders the section at prefix ("" = the whole config).
func (c *Config) node(prefix string) (*yaml.Node, error) {
	rv := reflect.ValueOf(c).Elem()
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, name := range schema.order[prefix] {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		var val *yaml.Node
		if schema.groups[path] {
			v, err := c.node(path)
			if err != nil {
				return nil, err
			}
			val = v
		} else {
			l := schema.byPath[path]
			fv := rv.FieldByIndex(l.index)
			if secretKeys[path] && !fv.IsZero() {
				fv = reflect.ValueOf(redacted)
			}
			v, err := toNode(fv)
			if err != nil {
				return nil, err
			}
			val = v
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, val)
	}
	return n, nil
}

// toNode renders v (a leaf value) as a YAML node that loads back to v:
// durations as Go duration strings, since a bare number is refused; strings
// always tagged !!str, so "true" or "007" stays text; maps sorted by key, so
// the output is stable.
func toNode(v reflect.Value) (*yaml.Node, error) {
	switch {
	case v.Type() == durationType:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: confcheck.FormatDuration(time.Duration(v.Int()))}, nil
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
