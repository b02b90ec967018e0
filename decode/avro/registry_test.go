package avro_test

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/schemareg"
	"github.com/flatline-dev/flatline/internal/testenv"
)

func TestUnreachableRegistryIsAnOutageUntilItIsBack(t *testing.T) {
	f := newHeartbeatFixture(t)
	srv, reg, dec, value := f.srv, f.reg, f.dec, f.value
	ctx := testenv.Context(t, 10*time.Second)

	srv.Stop()
	for range 2 {
		_, err := dec.Decode(ctx, value)
		if !errors.Is(err, avro.ErrUnavailable) {
			t.Fatalf("Decode with the registry stopped = %v, want ErrUnavailable", err)
		}
		if errors.Is(err, avro.ErrBadWire) || errors.Is(err, avro.ErrUnknownSchema) {
			t.Fatalf("Decode with the registry stopped = %v: an outage taken for bad input", err)
		}
	}
	health := reg.Healthy()
	if !errors.Is(health, avro.ErrUnavailable) || !strings.Contains(health.Error(), "connection refused") ||
		!strings.Contains(health.Error(), srv.URL()) {
		t.Fatalf("Healthy() = %v, want ErrUnavailable naming the registry's URL and the refused connection", health)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	rec, err := dec.Decode(ctx, value)
	if err != nil {
		t.Fatalf("Decode with the registry back: %v", err)
	}
	checkLookups(t, rec, []lookupCase{{"device_id", avro.Value{Kind: avro.KindString, Str: "d-42"}, true}})
	if err := reg.Healthy(); err != nil {
		t.Errorf("Healthy() = %v with the registry back, want nil", err)
	}

	// A schema in the cache needs no registry.
	srv.Stop()
	if _, err := dec.Decode(ctx, value); err != nil {
		t.Errorf("Decode of a cached schema id with the registry stopped: %v", err)
	}
}

func TestRegistryThatDoesNotAnswerTimesOut(t *testing.T) {
	cfg := avro.DefaultConfig()
	cfg.URL = startHungServer(t)
	cfg.Timeout = 100 * time.Millisecond
	reg, dec := newDecoder(t, cfg)

	_, err := dec.Decode(testenv.Context(t, 10*time.Second), []byte{0, 0, 0, 0, 1, 0})
	if !errors.Is(err, avro.ErrUnavailable) {
		t.Fatalf("Decode = %v, want ErrUnavailable", err)
	}
	if health := reg.Healthy(); !errors.Is(health, avro.ErrUnavailable) || !strings.Contains(health.Error(), "Timeout") {
		t.Errorf("Healthy() = %v, want the timeout", health)
	}
}

func TestBasicAuthWithAPasswordFile(t *testing.T) {
	srv := testenv.SchemaRegistry(t, schemareg.WithBasicAuth("flatline", "s3cret"))
	id, schema := register(t, srv, "heartbeats-value", avro.HeartbeatSchema)
	value := encode(t, id, schema, heartbeat())
	ctx := testenv.Context(t, 10*time.Second)
	file := testenv.SecretFile(t, "s3cret\n")

	cfg := configFor(srv)
	cfg.Username, cfg.PasswordFile = "flatline", file
	_, dec := newDecoder(t, cfg)
	if _, err := dec.Decode(ctx, value); err != nil {
		t.Fatalf("Decode with the password from its file: %v", err)
	}

	for name, password := range map[string]string{"wrong password": "guess", "no credentials": ""} {
		cfg := configFor(srv)
		if password != "" {
			cfg.Username, cfg.Password = "flatline", password
		}
		reg, dec := newDecoder(t, cfg)
		if _, err := dec.Decode(ctx, value); !errors.Is(err, avro.ErrUnavailable) {
			t.Errorf("%s: Decode = %v, want ErrUnavailable: refused credentials are an outage to fix, not bad records", name, err)
		}
		if health := reg.Healthy(); health == nil || !strings.Contains(health.Error(), "401") {
			t.Errorf("%s: Healthy() = %v, want the 401", name, health)
		}
	}
}

func TestTLSVerifiesTheRegistryWithTheCAFile(t *testing.T) {
	certs := testenv.NewCerts(t)
	srv := testenv.SchemaRegistry(t, schemareg.WithTLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}))
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("URL() = %s, want https://", srv.URL())
	}
	id, schema := register(t, srv, "heartbeats-value", avro.HeartbeatSchema)
	value := encode(t, id, schema, heartbeat())
	ctx := testenv.Context(t, 10*time.Second)

	cfg := configFor(srv)
	cfg.TLS.Enabled, cfg.TLS.CAFile = true, certs.CAFile
	_, dec := newDecoder(t, cfg)
	if _, err := dec.Decode(ctx, value); err != nil {
		t.Fatalf("Decode over TLS: %v", err)
	}

	// Without the CA, the registry's certificate is unknown.
	reg, dec := newDecoder(t, configFor(srv))
	if _, err := dec.Decode(ctx, value); !errors.Is(err, avro.ErrUnavailable) {
		t.Fatalf("Decode without the CA = %v, want ErrUnavailable", err)
	}
	if health := reg.Healthy(); health == nil || !strings.Contains(health.Error(), "certificate") {
		t.Errorf("Healthy() = %v, want the certificate error", health)
	}
}

// startHungServer accepts connections and never answers, until the test
// ends; it returns its URL.
func startHungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}
