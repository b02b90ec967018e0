package httpapi

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// get requests url with client, as user:password when user is set, and
// returns the status and body.
func get(t *testing.T, client *http.Client, url, user, password string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), nil
}

// With http.web_config_file, every endpoint is served over TLS and asks
// for a basic-auth user of the file: without credentials, or with a wrong
// password, a 401 that shows nothing; with them, the endpoint. A plain
// HTTP request to the TLS listener is not served.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	const user, password = "prometheus", "scrape-Pass-1"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Expose: ExposeAll, WebConfigFile: testenv.File(t, "web.yml", "tls_server_config:\n"+
		"  cert_file: "+certs.ServerCert+"\n  key_file: "+certs.ServerKey+"\n"+
		"basic_auth_users:\n  "+user+": "+string(hash)+"\n")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, cfg)
	serve(t, s)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	base := "https://" + s.Addr()

	for _, path := range []string{"/", "/metrics", "/healthz", "/readyz", "/status", "/devices/down", "/extra", "/nope"} {
		for _, who := range []struct{ user, password string }{{"", ""}, {user, "wrong"}, {"nobody", password}} {
			code, body, err := get(t, client, base+path, who.user, who.password)
			if err != nil {
				t.Fatalf("GET %s as %q: %v", path, who.user, err)
			}
			if code != http.StatusUnauthorized || strings.Contains(body, "dev-1") {
				t.Errorf("GET %s as %q/%q = %d %q, want 401 showing nothing", path, who.user, who.password, code, body)
			}
		}
		want := http.StatusOK
		if path == "/nope" {
			want = http.StatusNotFound
		}
		if code, body, err := get(t, client, base+path, user, password); err != nil || code != want {
			t.Errorf("GET %s with credentials = %d %q, %v; want %d", path, code, body, err, want)
		}
	}
	// Behind the authentication, the other limits hold.
	req, _ := http.NewRequest(http.MethodPost, base+"/status", nil)
	req.SetBasicAuth(user, password)
	if res, err := client.Do(req); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status with credentials: %v, %v; want 405", res, err)
	} else {
		_ = res.Body.Close()
	}

	plain := &http.Client{}
	code, body, err := get(t, plain, "http://"+s.Addr()+"/healthz", user, password)
	if err == nil && (code == http.StatusOK || strings.Contains(body, "ok")) {
		t.Errorf("plain HTTP to the TLS listener = %d %q: served", code, body)
	}
	t.Logf("plain HTTP to the TLS listener: %d %q %v", code, body, err)
}

// A client CA in the web config makes the server ask for a client
// certificate it signed: without one, the handshake fails.
func TestWebConfigClientCertificates(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	cfg := Config{Expose: ExposeAll, WebConfigFile: testenv.File(t, "web.yml", "tls_server_config:\n"+
		"  cert_file: "+certs.ServerCert+"\n  key_file: "+certs.ServerKey+"\n"+
		"  client_ca_file: "+certs.CAFile+"\n  client_auth_type: RequireAndVerifyClientCert\n")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, cfg)
	serve(t, s)
	client := func(certs []tls.Certificate, pool *tls.Config) *http.Client {
		pool.Certificates = certs
		return &http.Client{Transport: &http.Transport{TLSClientConfig: pool}}
	}
	pair, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	with := client([]tls.Certificate{pair}, &tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12})
	defer with.CloseIdleConnections()
	if code, body, err := get(t, with, "https://"+s.Addr()+"/metrics", "", ""); err != nil || code != http.StatusOK {
		t.Errorf("with a client certificate: %d %q, %v; want 200", code, body, err)
	}
	without := client(nil, &tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12})
	defer without.CloseIdleConnections()
	if code, _, err := get(t, without, "https://"+s.Addr()+"/metrics", "", ""); err == nil {
		t.Errorf("without a client certificate: %d, want a failed handshake", code)
	}
}
