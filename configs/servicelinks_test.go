package configs

import (
	"strings"
	"testing"
)

func TestUnknownEnvFailsAStrictLoadNamingEveryVariable(t *testing.T) {
	t.Parallel()
	env := []string{"FLATLINE_SCANER_INTERVAL=1s", "FLATLINE_REDIS_TLS=true", "FLATLINE_LOG_LEVEL=warn"}
	_, err := Load(LoadOptions{Env: env, StrictEnv: true})
	want := "environment variables FLATLINE_REDIS_TLS, FLATLINE_SCANER_INTERVAL (did you mean FLATLINE_SCANNER_INTERVAL?) are not flatline settings"
	if err == nil || err.Error() != want {
		t.Fatalf("Load = %v, want %q", err, want)
	}
	_, err = Load(LoadOptions{Env: env[1:], StrictEnv: true})
	if want := "environment variable FLATLINE_REDIS_TLS is not a flatline setting"; err == nil || err.Error() != want {
		t.Fatalf("Load = %v, want %q", err, want)
	}
	if _, err := Load(LoadOptions{Env: env[2:], StrictEnv: true}); err != nil {
		t.Fatalf("known variables alone: %v", err)
	}
}

// What Kubernetes injects for Services "flatline" and "flatline-redis".
var serviceLinks = []string{
	"FLATLINE_SERVICE_HOST=10.96.0.12",
	"FLATLINE_SERVICE_PORT=9464",
	"FLATLINE_SERVICE_PORT_HTTP=9464",
	"FLATLINE_PORT=tcp://10.96.0.12:9464",
	"FLATLINE_PORT_9464_TCP=tcp://10.96.0.12:9464",
	"FLATLINE_PORT_9464_TCP_PROTO=tcp",
	"FLATLINE_PORT_9464_TCP_PORT=9464",
	"FLATLINE_PORT_9464_TCP_ADDR=10.96.0.12",
	"FLATLINE_REDIS_SERVICE_HOST=10.96.0.13",
	"FLATLINE_REDIS_PORT=tcp://10.96.0.13:6379",
	"FLATLINE_REDIS_PORT_6379_TCP_ADDR=10.96.0.13",
}

func TestKubernetesServiceLinksAreNeitherWarningsNorErrors(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		cfg, err := Load(LoadOptions{Env: append([]string{"FLATLINE_LOG_LEVEL=warn"}, serviceLinks...), StrictEnv: strict})
		if err != nil {
			t.Fatalf("strict=%v: %v", strict, err)
		}
		if len(cfg.Warnings) != 0 || cfg.Log.Level != "warn" {
			t.Fatalf("strict=%v: warnings %q, log.level %q", strict, cfg.Warnings, cfg.Log.Level)
		}
	}
}

func TestASettingShapedLikeNoServiceLinkIsStillCaught(t *testing.T) {
	t.Parallel()
	for _, kv := range []string{
		"FLATLINE_HTTP_PORT=9464",         // a link's value is tcp://host:port
		"FLATLINE_REDIS_PORT=6379",        // likewise
		"FLATLINE_SERVICE_PORT=http",      // a link's value is a number
		"FLATLINE_PORT_9464_TCP_PROTO=ws", // not a protocol Kubernetes names
	} {
		name, _, _ := strings.Cut(kv, "=")
		cfg, err := Load(LoadOptions{Env: []string{kv}})
		if err != nil || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], name) {
			t.Errorf("%s: err %v, warnings %q: want one warning naming it", kv, err, cfg.Warnings)
		}
		if _, err := Load(LoadOptions{Env: []string{kv}, StrictEnv: true}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: strict load = %v, want an error naming it", kv, err)
		}
	}
}
