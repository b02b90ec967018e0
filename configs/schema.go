package configs

import (
	"fmt"
	"reflect"
	"strings"
)

// envPrefix starts every environment override.
const envPrefix = "FLATLINE_"

// tagName is the struct tag that names a field's key, `config:"batch_size"`.
// Only this package reads it: the file is walked as YAML nodes, not decoded
// into the structs, so neither yaml nor any config library sees the tag.
const tagName = "config"

// leaf is one settable key: a scalar, a list or a map (timeouts.classes),
// addressed by its dotted path.
type leaf struct {
	path  string
	env   string // FLATLINE_ + path upper-cased, "." -> "_"
	typ   reflect.Type
	index []int // reflect.Value.FieldByIndex from Config
}

// keySchema is the key set of Config, derived from its config tags so a field
// added to a stage's Config is loadable (and must be documented) at once.
type keySchema struct {
	leaves []*leaf             // in struct order
	byPath map[string]*leaf    // path -> leaf
	byEnv  map[string]*leaf    // env name -> leaf
	groups map[string]bool     // paths of sections: "redis", "kafka.tls", ...
	order  map[string][]string // group path ("" = top) -> child names in struct order
}

// schema is built once, when the package starts: a Config field without a
// tag or of a type the loader cannot read panics there, in every test,
// rather than when an operator first sets it.
var schema = mustSchema()

func mustSchema() *keySchema {
	s := &keySchema{
		byPath: make(map[string]*leaf),
		byEnv:  make(map[string]*leaf),
		groups: make(map[string]bool),
		order:  make(map[string][]string),
	}
	if err := s.walk(reflect.TypeOf(Config{}), "", nil); err != nil {
		panic("configs: " + err.Error())
	}
	return s
}

// walk adds the fields of struct t, found at index from Config, under
// prefix: a struct field is a section, any other field a key.
func (s *keySchema) walk(t reflect.Type, prefix string, index []int) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Tag.Get(tagName)
		if name == "-" {
			continue
		}
		if name == "" {
			return fmt.Errorf("%s.%s has no %s tag", t, f.Name, tagName)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		idx := append(append([]int(nil), index...), i)
		s.order[prefix] = append(s.order[prefix], name)
		if f.Type.Kind() == reflect.Struct {
			s.groups[path] = true
			if err := s.walk(f.Type, path, idx); err != nil {
				return err
			}
			continue
		}
		if err := checkLeafType(f.Type); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		l := &leaf{
			path:  path,
			env:   envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
			typ:   f.Type,
			index: idx,
		}
		// "a.b_c" and "a_b.c" would share FLATLINE_A_B_C, and the
		// environment could not say which it sets.
		if other, ok := s.byEnv[l.env]; ok {
			return fmt.Errorf("%s and %s share the environment variable %s", other.path, path, l.env)
		}
		s.leaves = append(s.leaves, l)
		s.byPath[path] = l
		s.byEnv[l.env] = l
	}
	return nil
}

// Keys returns every configuration key path (e.g. "scanner.batch_size"), in
// the order of the Config structs. timeouts.classes is one key: its entries
// are class names, not keys.
func Keys() []string {
	out := make([]string, len(schema.leaves))
	for i, l := range schema.leaves {
		out[i] = l.path
	}
	return out
}

// EnvName returns the environment variable that overrides key, or "" when
// key is not a configuration key.
func EnvName(key string) string {
	if l, ok := schema.byPath[key]; ok {
		return l.env
	}
	return ""
}
