package schemareg_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/flatline-dev/flatline/internal/schemareg"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestMain fails the package's tests when a goroutine they started
// outlives them (testenv.VerifyTestMain).
func TestMain(m *testing.M) { testenv.VerifyTestMain(m) }

const beat = `{"type": "record", "name": "Beat", "fields": [{"name": "device_id", "type": "string"}]}`

func client(t *testing.T, opts ...sr.ClientOpt) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestFranzGoClientRegistersAndReadsSchemas(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	cl := client(t, sr.URLs(srv.URL()))
	ctx := testenv.Context(t, 10*time.Second)

	created, err := cl.CreateSchema(ctx, "beats-value", sr.Schema{Schema: beat})
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.CreateSchema(ctx, "beats-value", sr.Schema{Schema: beat})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != created.ID {
		t.Errorf("the same schema registered twice got ids %d and %d", created.ID, again.ID)
	}
	if id, err := srv.Register("beats-value", beat); err != nil || id != created.ID {
		t.Errorf("Register of the same schema = %d, %v; want %d", id, err, created.ID)
	}
	got, err := cl.SchemaByID(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	var gotJSON, wantJSON any
	if err := json.Unmarshal([]byte(got.Schema), &gotJSON); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(beat), &wantJSON)
	if b1, b2 := mustJSON(t, gotJSON), mustJSON(t, wantJSON); b1 != b2 {
		t.Errorf("SchemaByID = %s, want %s", b1, b2)
	}
	other, err := srv.Register("others-value", `{"type": "record", "name": "Other", "fields": []}`)
	if err != nil {
		t.Fatal(err)
	}
	if other == created.ID {
		t.Errorf("two schemas share id %d", other)
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(subjects)
	if want := []string{"beats-value", "others-value"}; !slices.Equal(subjects, want) {
		t.Errorf("Subjects = %v, want %v", subjects, want)
	}
}

func TestUnknownIDIsThe404OfTheRegistry(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	resp, err := http.Get(srv.URL() + "/schemas/ids/42")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var answer struct {
		ErrorCode int    `json:"error_code"`
		Message   string `json:"message"`
	}
	if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &answer) != nil || answer.ErrorCode != 40403 {
		t.Errorf("GET an unknown id = %d %s, want 404 with error_code 40403", resp.StatusCode, body)
	}
}

func TestStopRefusesUntilRestartWithTheSameSchemas(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, err := srv.Register("beats-value", beat)
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, sr.URLs(srv.URL()))
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := cl.SchemaByID(ctx, id); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Stop() // twice is once
	if _, err := cl.SchemaByID(ctx, id); err == nil {
		t.Fatal("the registry answered while stopped")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatalf("a second Restart: %v", err)
	}
	if _, err := cl.SchemaByID(ctx, id); err != nil {
		t.Fatalf("SchemaByID after Restart: %v", err)
	}
	srv.Close()
	if err := srv.Restart(); err == nil {
		t.Error("Restart after Close served again")
	}
}

func TestBasicAuthRefusesOtherCredentials(t *testing.T) {
	srv := testenv.SchemaRegistry(t, schemareg.WithBasicAuth("flatline", "s3cret"))
	ctx := testenv.Context(t, 10*time.Second)

	if _, err := client(t, sr.URLs(srv.URL()), sr.BasicAuth("flatline", "s3cret")).CreateSchema(ctx, "beats-value", sr.Schema{Schema: beat}); err != nil {
		t.Fatalf("with the credentials: %v", err)
	}
	for name, opts := range map[string][]sr.ClientOpt{
		"none":           {sr.URLs(srv.URL())},
		"wrong password": {sr.URLs(srv.URL()), sr.BasicAuth("flatline", "guess")},
		"wrong user":     {sr.URLs(srv.URL()), sr.BasicAuth("other", "s3cret")},
	} {
		_, err := client(t, opts...).Subjects(ctx)
		var re *sr.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: Subjects = %v, want 401", name, err)
		}
	}
}

func TestTLSServesHTTPS(t *testing.T) {
	certs := testenv.NewCerts(t)
	srv := testenv.SchemaRegistry(t, schemareg.WithTLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}))
	ctx := testenv.Context(t, 10*time.Second)
	cl := client(t, sr.URLs(srv.URL()), sr.DialTLSConfig(&tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12}))
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	srv.Stop()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("over TLS after Restart: %v", err)
	}
}

func TestRequestsCountsEveryRequest(t *testing.T) {
	srv := testenv.SchemaRegistry(t, schemareg.WithBasicAuth("u", "p"))
	ctx := context.Background()
	if got := srv.Requests(); got != 0 {
		t.Fatalf("Requests() = %d before any, want 0", got)
	}
	_, _ = client(t, sr.URLs(srv.URL()), sr.BasicAuth("u", "p")).Subjects(ctx)
	_, _ = client(t, sr.URLs(srv.URL())).Subjects(ctx) // refused, counted
	if _, err := srv.Register("beats-value", beat); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests(); got != 2 {
		t.Errorf("Requests() = %d after two requests and a Register, want 2", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
