package configs

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// envPrefix starts every environment override.
const envPrefix = "FLATLINE_"

// tagName is the struct tag that names a field's key, `config:"batch_size"`.
// Only this package reads it: the file is walked as YAML nodes, not decoded
// into the structs, so neither yaml nor any config library sees the tag.
const tagName = "config"

// secretKeys are the keys whose values Redacted hides. The stage packages
// own their structs, so the list lives here rather than in a struct tag.
var secretKeys = map[string]bool{
	"redis.password":      true,
	"kafka.sasl.password": true,
}

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

var schema = mustSchema()

var durationType = reflect.TypeOf(time.Duration(0))

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

func (s *keySchema) walk(t reflect.Type, prefix string, index []int) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get(tagName), ",")
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
		if other, ok := s.byEnv[l.env]; ok {
			return fmt.Errorf("%s and %s share the environment variable %s", other.path, path, l.env)
		}
		s.leaves = append(s.leaves, l)
		s.byPath[path] = l
		s.byEnv[l.env] = l
	}
	return nil
}

// checkLeafType accepts the value types the loader can parse from YAML and
// from strings: scalars, lists of scalars and maps from string to scalar.
func checkLeafType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Slice:
		if !isScalar(t.Elem()) {
			return fmt.Errorf("unsupported list element type %s", t.Elem())
		}
		return nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String || !isScalar(t.Elem()) {
			return fmt.Errorf("unsupported map type %s", t)
		}
		return nil
	}
	if !isScalar(t) {
		return fmt.Errorf("unsupported type %s", t)
	}
	return nil
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
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

// suggest returns the known name closest to name, or "" when none is close
// enough to be a plausible typo.
func suggest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if bestDist < 0 || d < bestDist || (d == bestDist && k < best) {
			best, bestDist = k, d
		}
	}
	if bestDist >= 0 && bestDist <= 2 {
		return best
	}
	// Right name, wrong section: "scanner.max_skew" -> "ingest.max_skew".
	last := name[strings.LastIndex(name, ".")+1:]
	var same []string
	for _, k := range known {
		if k[strings.LastIndex(k, ".")+1:] == last {
			same = append(same, k)
		}
	}
	if len(same) == 1 {
		return same[0]
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// knownPaths is every leaf and section path, for suggestions.
func knownPaths() []string {
	out := make([]string, 0, len(schema.leaves)+len(schema.groups))
	for _, l := range schema.leaves {
		out = append(out, l.path)
	}
	for g := range schema.groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func knownEnv() []string {
	out := make([]string, len(schema.leaves))
	for i, l := range schema.leaves {
		out[i] = l.env
	}
	return out
}
