package configs

import (
	"bytes"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// redacted replaces a secret that is set.
const redacted = "<redacted>"

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
