package faults_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestCLISecrets runs the real binary: `flatline config print` with both
// passwords in the environment shows neither, and `flatline serve` against
// a redis-server with requirepass but without redis.password exits
// non-zero with one clear line on stderr (no stack trace, no usage text).
func TestCLISecrets(t *testing.T) {
	t.Parallel()
	const redisPW, kafkaPW = "cli-Redis-s3cret", "cli-Kafka-s3cret"
	bin := flatlineBinary(t)
	rs := testenv.Redis(t, "--requirepass", redisPW)
	k := testenv.Kafka(t, 1, e2etest.Topics...)
	base := map[string]string{
		"FLATLINE_REDIS_ADDRS":          rs.Addr(),
		"FLATLINE_KAFKA_BROKERS":        k.Brokers()[0],
		"FLATLINE_KAFKA_SASL_MECHANISM": "PLAIN",
		"FLATLINE_KAFKA_SASL_USERNAME":  "flatline",
		"FLATLINE_KAFKA_SASL_PASSWORD":  kafkaPW,
		"FLATLINE_REDIS_PASSWORD":       redisPW,
		"FLATLINE_HTTP_ADDR":            "",
	}
	run := func(env map[string]string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = testenv.ChildEnv(env)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		p, err := testenv.StartProcess(cmd)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			p.Kill()
			t.Fatalf("flatline %v did not exit", args)
		}
		return o.String(), e.String(), p.State().ExitCode()
	}

	out, errOut, code := run(base, "config", "print")
	if code != 0 {
		t.Fatalf("config print exited %d: %s", code, errOut)
	}
	for _, s := range []string{redisPW, kafkaPW} {
		if strings.Contains(out+errOut, s) {
			t.Errorf("config print shows a password:\n%s", out)
		}
	}
	if strings.Count(out, "<redacted>") != 2 {
		t.Errorf("config print does not mark both passwords as set:\n%s", out)
	}

	noPW := map[string]string{}
	for k, v := range base {
		noPW[k] = v
	}
	delete(noPW, "FLATLINE_REDIS_PASSWORD")
	delete(noPW, "FLATLINE_KAFKA_SASL_MECHANISM")
	delete(noPW, "FLATLINE_KAFKA_SASL_USERNAME")
	delete(noPW, "FLATLINE_KAFKA_SASL_PASSWORD")
	out, errOut, code = run(noPW, "serve")
	lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
	if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "flatline: ") || !strings.Contains(lines[0], "NOAUTH") || out != "" {
		t.Errorf("serve without redis.password: exit %d, stdout %q, stderr %q; want a non-zero exit and one line naming the NOAUTH error", code, out, errOut)
	}
	t.Logf("serve without redis.password: exit %d: %s", code, strings.TrimSpace(errOut))
}
