package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestVersionPrintsOneJSONDocument(t *testing.T) {
	t.Parallel()
	for _, flag := range [][]string{{"-o", "json"}, {"--output", "json"}, {"--output=json"}} {
		r := run(t, nil, append([]string{"version"}, flag...)...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", flag, r.code, r.stderr)
		}
		var v versionInfo
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || dec.More() {
			t.Fatalf("%v: not one JSON document (%v):\n%s", flag, err, r.stdout)
		}
		if v.Version != version || v.GoVersion != runtime.Version() {
			t.Fatalf("%v: got %+v", flag, v)
		}
	}
	if r := run(t, nil, "version"); r.stdout != "flatline "+version+"\n" {
		t.Fatalf("text output changed: %q", r.stdout)
	}
}

func TestConfigPrintAsJSONHasTheKeysAndRedactsSecrets(t *testing.T) {
	t.Parallel()
	env := []string{
		"FLATLINE_REDIS_PASSWORD=hunter2",
		"FLATLINE_SCANNER_GRACE=50ms",
		"FLATLINE_REDIS_ADDRS=a:1,b:2",
	}
	r := run(t, env, "config", "print", "-o", "json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "hunter2") {
		t.Fatalf("the password is printed:\n%s", r.stdout)
	}
	var doc struct {
		Redis struct {
			Addrs    []string `json:"addrs"`
			Password string   `json:"password"`
			DB       int      `json:"db"`
		} `json:"redis"`
		Scanner struct {
			Grace string `json:"grace"`
		} `json:"scanner"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if strings.Join(doc.Redis.Addrs, ",") != "a:1,b:2" || doc.Redis.Password != "<redacted>" || doc.Scanner.Grace != "50ms" {
		t.Fatalf("got %+v", doc)
	}
	// Keys keep flatline.yaml's order, as in the YAML output.
	if !strings.HasPrefix(strings.TrimSpace(r.stdout), "{\n  \"redis\": {") {
		t.Fatalf("redis is not the first key:\n%s", r.stdout)
	}
}

func TestAnUnknownOutputFormatIsOneError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"version", "-o", "yaml"},
		{"config", "print", "--output", "xml"},
		// Refused before connecting: no Redis is needed to see the error.
		{"shards", "status", "-o", "table"},
		{"device", "get", "d-1", "-o", "yaml"},
	} {
		r := run(t, nil, args...)
		if r.code == 0 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, "--output: unknown format") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestJSONFlagContradictingOutputIsRefused(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "shards", "status", "--json", "-o", "text")
	if r.code == 0 || !strings.Contains(r.stderr, "--json contradicts --output text") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
