package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// TestTLSBuild: redis.tls (also used for kafka.tls) builds the tls.Config
// its fields describe, and refuses files that are missing or hold no
// certificate, naming the key.
func TestTLSBuild(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	junk := testenv.File(t, "junk.pem", "not a certificate")

	if tc, err := (tlsconf.Config{}).Build(); tc != nil || err != nil {
		t.Errorf("disabled TLS built %v, %v; want nil, nil", tc, err)
	}
	tc, err := tlsconf.Config{Enabled: true}.Build()
	if err != nil || tc == nil || tc.RootCAs != nil || tc.InsecureSkipVerify || tc.MinVersion != tls.VersionTLS12 || len(tc.Certificates) != 0 {
		t.Errorf("enabled TLS without files: %+v, %v; want system roots, verification on, TLS 1.2+", tc, err)
	}
	full := tlsconf.Config{Enabled: true, CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "localhost"}
	if err := full.Validate("redis.tls"); err != nil {
		t.Fatal(err)
	}
	tc, err = full.Build()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "localhost" || tc.InsecureSkipVerify {
		t.Errorf("built %+v", tc)
	}
	if tc, _ := (tlsconf.Config{Enabled: true, InsecureSkipVerify: true}).Build(); !tc.InsecureSkipVerify {
		t.Error("insecure_skip_verify not applied")
	}

	// The built config really verifies the server with the CA and
	// presents the client certificate to a server that demands one.
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{certs.Server}, ClientCAs: certs.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err := handshake(srv, tc); err != nil {
		t.Errorf("handshake with CA and client certificate: %v", err)
	}
	noClient := full
	noClient.CertFile, noClient.KeyFile = "", ""
	tcNoClient, _ := noClient.Build()
	if err := handshake(srv, tcNoClient); err == nil {
		t.Error("a server demanding a client certificate accepted none")
	}
	system, _ := tlsconf.Config{Enabled: true, ServerName: "localhost"}.Build()
	if err := handshake(srv, system); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("a server signed by an unknown CA was accepted with the system roots: %v", err)
	}

	for _, c := range []struct {
		name string
		cfg  tlsconf.Config
		want string
	}{
		{"missing CA", tlsconf.Config{Enabled: true, CAFile: "/nonexistent/ca.pem"}, "redis.tls.ca_file"},
		{"cert without key", tlsconf.Config{Enabled: true, CertFile: certs.ClientCert}, "redis.tls: cert_file and key_file go together"},
		{"missing key", tlsconf.Config{Enabled: true, CertFile: certs.ClientCert, KeyFile: "/nonexistent/key.pem"}, "redis.tls.key_file"},
	} {
		err := c.cfg.Validate("redis.tls")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := (tlsconf.Config{Enabled: true, CAFile: junk}).Build(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate built: %v", err)
	}
	if _, err := (tlsconf.Config{Enabled: true, CertFile: certs.ClientCert, KeyFile: certs.ServerKey}).Build(); err == nil {
		t.Error("a certificate with the wrong key built")
	}
	// A disabled section is not checked: files of an unused TLS setup
	// must not stop the service.
	if err := (tlsconf.Config{CAFile: "/nonexistent"}).Validate("redis.tls"); err != nil {
		t.Errorf("disabled TLS validated its files: %v", err)
	}
}

// tlsServer accepts TLS connections on loopback and completes their
// handshakes until the test ends.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			_, _ = io.Copy(io.Discard, conn)
			conn.Close()
		}
	}()
	return l.Addr().String()
}

// handshake dials addr with cfg and completes a handshake, reading once so
// that a server's rejection of the client certificate (TLS 1.3 reports it
// after the client's handshake) surfaces.
func handshake(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // the server accepted us and waits for data
	}
	return err
}
