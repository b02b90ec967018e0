package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadOptions are the sources Load reads besides the defaults.
type LoadOptions struct {
	// File is the YAML file; empty means none.
	File string
	// Env is the environment in os.Environ() form ("NAME=value"); only
	// FLATLINE_* variables are read. Nil means none.
	Env []string
	// Set maps key paths to values from flags, e.g. {"log.level": "debug"};
	// it has the highest precedence. Values are written as in the
	// environment: lists comma-separated, timeouts.classes as
	// "name=duration,...".
	Set map[string]string
}

// setting is one value from one source.
type setting struct {
	leaf   *leaf
	value  reflect.Value
	origin string // for errors: `config file "x", line 3`, FLATLINE_X, ...
}

// Load builds the configuration from the defaults, the file, the environment
// and opts.Set, in that order of precedence, and validates it. Every error
// is one line naming the key (and the file line or environment variable it
// came from), fit to print as "flatline: <err>".
func Load(opts LoadOptions) (*Config, error) {
	var data []byte
	if opts.File != "" {
		b, err := os.ReadFile(opts.File)
		if err != nil {
			return nil, fileError(opts.File, err)
		}
		data = b
	}
	return load(opts, data)
}

// load is Load with the file's contents already read, for tests and fuzzing.
func load(opts LoadOptions, data []byte) (*Config, error) {
	cfg, err := assemble(opts, data)
	if err != nil {
		return nil, oneLine(err)
	}
	return cfg, nil
}

func assemble(opts LoadOptions, data []byte) (*Config, error) {
	var settings []setting
	if opts.File != "" {
		s, err := parseFile(opts.File, data)
		if err != nil {
			return nil, err
		}
		settings = append(settings, s...)
	}
	s, warnings, err := parseEnv(opts.Env)
	if err != nil {
		return nil, err
	}
	settings = append(settings, s...)
	s, err = parseSet(opts.Set)
	if err != nil {
		return nil, err
	}
	settings = append(settings, s...)

	cfg := Default()
	rv := reflect.ValueOf(&cfg).Elem()
	origins := make(map[string]string)
	for _, s := range settings {
		rv.FieldByIndex(s.leaf.index).Set(s.value)
		origins[s.leaf.path] = s.origin
	}
	cfg.Warnings = warnings
	if err := cfg.Validate(); err != nil {
		return nil, withOrigin(err, origins)
	}
	return &cfg, nil
}

// lineError escapes line breaks in an error from a stage's Validate, which
// may quote a user's value verbatim ("address a\nb: missing port").
type lineError struct{ err error }

var lineEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)

func (e lineError) Error() string { return lineEscaper.Replace(e.err.Error()) }
func (e lineError) Unwrap() error { return e.err }

func oneLine(err error) error {
	if strings.ContainsAny(err.Error(), "\n\r") {
		return lineError{err}
	}
	return err
}

func fileError(name string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("config file %q: no such file", name)
	case errors.As(err, &pe):
		return fmt.Errorf("config file %q: %w", name, pe.Err)
	}
	return fmt.Errorf("config file %q: %w", name, err)
}

// withOrigin adds where the offending key was set to a Validate error, which
// by convention starts with the key: an operator with both a file and a
// FLATLINE_ variable should not have to guess which one is wrong.
func withOrigin(err error, origins map[string]string) error {
	key, _, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.ContainsAny(key, " \t") {
		return err
	}
	for p := key; p != ""; {
		if o, ok := origins[p]; ok {
			return fmt.Errorf("%w (from %s)", err, o)
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return err
}

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

type fileParser struct {
	name string
	out  []setting
}

func (p *fileParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("config file %q: line %d: %s", p.name, line, fmt.Sprintf(format, args...))
}

func (p *fileParser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.Join(strings.Fields(msg), " ") // one line
	return fmt.Errorf("config file %q: %s", p.name, msg)
}

func (p *fileParser) mapping(n *yaml.Node, prefix string) error {
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errorf(k.Line, "keys must be names, got %s", describe(k))
		}
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
		val, line, err := p.value(l, v)
		if err != nil {
			return err
		}
		p.out = append(p.out, setting{leaf: l, value: val, origin: fmt.Sprintf("config file %q, line %d", p.name, line)})
	}
	return nil
}

func (p *fileParser) value(l *leaf, v *yaml.Node) (reflect.Value, int, error) {
	v = resolveAlias(v)
	if l.typ.Kind() != reflect.Map || isNull(v) {
		val, err := fromNode(l.typ, v)
		if err != nil {
			return reflect.Value{}, 0, p.errorf(v.Line, "%s: %v", l.path, err)
		}
		return val, v.Line, nil
	}
	if v.Kind != yaml.MappingNode {
		return reflect.Value{}, 0, p.errorf(v.Line, "%s: want a YAML mapping of name: %s, got %s", l.path, strings.TrimPrefix(want(l.typ.Elem()), "a "), describe(v))
	}
	out := reflect.Zero(l.typ)
	seen := make(map[string]int)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, e := resolveAlias(v.Content[i]), resolveAlias(v.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return reflect.Value{}, 0, p.errorf(k.Line, "%s: names must be strings, got %s", l.path, describe(k))
		}
		entry := entryPath(l.path, k.Value)
		if first, dup := seen[k.Value]; dup {
			return reflect.Value{}, 0, p.errorf(k.Line, "duplicate key %s (first at line %d)", entry, first)
		}
		seen[k.Value] = k.Line
		ev, err := scalarFromNode(l.typ.Elem(), e)
		if err != nil {
			return reflect.Value{}, 0, p.errorf(e.Line, "%s: %v", entry, err)
		}
		if out.IsNil() {
			out = reflect.MakeMap(l.typ)
		}
		out.SetMapIndex(reflect.ValueOf(k.Value).Convert(l.typ.Key()), ev)
	}
	return out, v.Line, nil
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

func unknownKey(path string) string {
	if schema.groups[path] {
		return fmt.Sprintf("%q is a section, not a key; set the keys under it", path)
	}
	msg := fmt.Sprintf("unknown key %q", path)
	if s := suggest(path, knownPaths()); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// parseEnv reads the FLATLINE_ variables of env. Key names contain
// underscores, so a variable is matched against the known keys' variable
// names rather than split on "_". An unknown FLATLINE_ variable is a warning:
// the environment is shared with other software and may outlive a config
// key, so it must not stop the service, but a typo must not pass unseen.
func parseEnv(env []string) ([]setting, []string, error) {
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
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)

	var out []setting
	var warnings []string
	for _, name := range names {
		l, ok := schema.byEnv[name]
		if !ok {
			w := fmt.Sprintf("environment variable %s is not a flatline setting; ignored", name)
			if s := suggest(name, knownEnv()); s != "" {
				w += fmt.Sprintf(" (did you mean %s?)", s)
			}
			warnings = append(warnings, w)
			continue
		}
		val, err := fromString(l.typ, vars[name])
		if err != nil {
			return nil, nil, fmt.Errorf("environment variable %s: %s: %v", name, l.path, err)
		}
		out = append(out, setting{leaf: l, value: val, origin: "environment variable " + name})
	}
	return out, warnings, nil
}

// parseSet reads flag overrides. Unlike the environment, an unknown key here
// is an error: someone typed it on this very command line.
func parseSet(set map[string]string) ([]setting, error) {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []setting
	for _, k := range keys {
		l, ok := schema.byPath[k]
		if !ok {
			return nil, errors.New(unknownKey(k))
		}
		val, err := fromString(l.typ, set[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out = append(out, setting{leaf: l, value: val, origin: "the command line"})
	}
	return out, nil
}
