package configs

import (
	"os"
	"reflect"
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
	// StrictEnv makes a FLATLINE_* variable that names no key an error
	// instead of a warning in Config.Warnings: for `config validate`.
	StrictEnv bool
}

// setting is one value from one source. Every source is parsed into
// settings before any is applied, so a bad value fails the load whole, and
// the last setting of a key tells Validate's error where its value came from.
type setting struct {
	leaf   *leaf
	value  reflect.Value
	origin string // `config file "x", line 3`, "environment variable FLATLINE_X", ...
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

// assemble applies the sources' settings over Default() in precedence order:
// a later setting of a key replaces the earlier one whole, which is why a
// list or the classes map from the environment is not merged into the file's.
func assemble(opts LoadOptions, data []byte) (*Config, error) {
	var settings []setting
	if opts.File != "" {
		s, err := parseFile(opts.File, data)
		if err != nil {
			return nil, err
		}
		settings = append(settings, s...)
	}
	s, warnings, err := parseEnv(opts.Env, opts.StrictEnv)
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
