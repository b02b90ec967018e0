package configs

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes as the config file. Load must not panic,
// must fail with one line, and on success give a valid configuration whose
// printed form (Redacted) loads back to the same values.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		string(documented(f)),
		"",
		"scanner:\n  interval: 1500ms\n  batch_size: 50\n",
		"timeouts:\n  classes:\n    sensor: 30s\n    \"odd name\": 2m\n",
		"redis:\n  addrs: [a:1, b:2]\n  password: 0123\n",
		"kafka:\n  sasl: {mechanism: PLAIN, username: u, password: p}\n",
		"roles: [ingest]\nshutdown_timeout: 5s\ninstance_id: pod-1\n",
		"x: &a [1, *a]\n",
		"timeouts:\n  default: &d 90s\n  classes: {a: *d}\n",
		"scanner: ~\nlog:\n  level: [debug]\n",
		"- a\n",
		"a: 1\n---\nb: 2\n",
		"http:\n  addr: \"a\\nb\"\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := load(LoadOptions{File: "fuzz.yaml"}, data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load succeeded but Validate() = %v", err)
		}
		out, err := cfg.Redacted()
		if err != nil {
			t.Fatalf("Redacted: %v", err)
		}
		back, err := load(LoadOptions{File: "printed.yaml"}, out)
		if err != nil {
			t.Fatalf("reloading Redacted output: %v\n%s", err, out)
		}
		want := *cfg
		for _, p := range []*string{&want.Redis.Password, &want.Kafka.SASL.Password} {
			if *p != "" {
				*p = redacted
			}
		}
		if !reflect.DeepEqual(*back, want) {
			t.Fatalf("round trip:\n%+v\nwant\n%+v\nprinted:\n%s", *back, want, out)
		}
	})
}
