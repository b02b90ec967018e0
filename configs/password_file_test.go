package configs

import (
	"reflect"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestPasswordFilesArePrintedAsPaths: `config print` shows where each
// password file is, never what it holds, and its output loads back to the
// same configuration (a redacted path would name no file); a password set
// both ways fails the load naming the key.
func TestPasswordFilesArePrintedAsPaths(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-in-a-file"
	file := testenv.SecretFile(t, pw+"\n")
	cfg, err := Load(LoadOptions{
		File: testenv.File(t, "flatline.yaml", "redis:\n  mode: sentinel\n  password_file: "+file+"\n  sentinel:\n    master: m\n    password_file: "+file+"\n"),
		Env:  []string{"FLATLINE_KAFKA_SASL_MECHANISM=PLAIN", "FLATLINE_KAFKA_SASL_USERNAME=u", "FLATLINE_KAFKA_SASL_PASSWORD_FILE=" + file},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Password != "" || cfg.Kafka.SASL.Password != "" {
		t.Errorf("a password file's content was loaded into the printed configuration")
	}
	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	if strings.Contains(text, pw) {
		t.Errorf("config print shows the password:\n%s", text)
	}
	if n := strings.Count(text, "password_file: "+file); n != 3 {
		t.Errorf("config print shows %d of the 3 password files:\n%s", n, text)
	}
	back, err := load(LoadOptions{File: "printed.yaml"}, out)
	if err != nil {
		t.Fatalf("reloading config print: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(*back, *cfg) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", *back, *cfg)
	}

	_, err = Load(LoadOptions{File: testenv.File(t, "flatline.yaml", "kafka:\n  sasl:\n    password: p\n    password_file: "+file+"\n")})
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password_file: set together with kafka.sasl.password") {
		t.Errorf("both kafka.sasl.password and its file: %v", err)
	}
}
