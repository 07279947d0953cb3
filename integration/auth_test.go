package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/pki"
	"github.com/crdserver/crdserver/server"
)

// client is a raw HTTPS client of a server with the given credentials.
type client struct {
	t     *testing.T
	url   string
	http  *http.Client
	token string
	hdr   []string
}

func newClient(t *testing.T, srv *server.Server, cert tls.Certificate) *client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CACert())
	tc := &tls.Config{RootCAs: pool}
	if cert.Certificate != nil {
		tc.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, url: srv.URL(), http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func certFor(t *testing.T, srv *server.Server, user string, groups ...string) tls.Certificate {
	t.Helper()
	c, k, err := srv.ClientCert(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func (c *client) do(method, path, body string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(c.hdr); i += 2 {
		req.Header.Add(c.hdr[i], c.hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

func writeTokens(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(p, []byte("jane-token,jane,1001,\"devs,qa\"\nroot-token,root,0,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAuthentication(t *testing.T) {
	e := start(t, func(c *server.Config) { c.TokenAuthFile = writeTokens(t) })
	e.createCRD(cronTabCRD(t))
	if !strings.HasPrefix(e.srv.URL(), "https://") {
		t.Fatalf("served on %s, not HTTPS", e.srv.URL())
	}

	anon := newClient(t, e.srv, tls.Certificate{})
	// Health and version are public.
	for _, p := range []string{"/readyz", "/livez", "/healthz", "/version"} {
		if r := anon.do("GET", p, ""); r.code != 200 {
			t.Errorf("anonymous GET %s: %d %s", p, r.code, r.body)
		}
	}
	expectStatus(t, anon.do("GET", "/apis", ""), 403, metav1.StatusReasonForbidden, `forbidden: User "system:anonymous" cannot get path "/apis"`)
	expectStatus(t, anon.do("GET", ctPath, ""), 403, metav1.StatusReasonForbidden,
		`crontabs.stable.example.com is forbidden: User "system:anonymous" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default"`)
	expectStatus(t, anon.do("GET", ctPath+"/x", ""), 403, metav1.StatusReasonForbidden,
		`crontabs.stable.example.com "x" is forbidden: User "system:anonymous" cannot get resource "crontabs" in API group "stable.example.com" in the namespace "default"`)

	// Bearer tokens from the token file.
	jane := newClient(t, e.srv, tls.Certificate{})
	jane.token = "jane-token"
	expectStatus(t, jane.do("GET", "/api/v1/namespaces/default", ""), 403, metav1.StatusReasonForbidden,
		`namespaces "default" is forbidden: User "jane" cannot get resource "namespaces" in API group "" in the namespace "default"`)
	root := newClient(t, e.srv, tls.Certificate{})
	root.token = "root-token"
	if r := root.do("GET", ctPath, ""); r.code != 200 {
		t.Fatalf("system:masters token: %d %s", r.code, r.body)
	}
	// A bad token is 401 even though anonymous requests are served.
	bad := newClient(t, e.srv, tls.Certificate{})
	bad.token = "nope"
	st := expectStatus(t, bad.do("GET", "/readyz", ""), 401, metav1.StatusReasonUnauthorized, "Unauthorized")
	if st.Message != "Unauthorized" {
		t.Fatalf("message %q", st.Message)
	}

	// Client certificates: CN the user, O the groups.
	bob := newClient(t, e.srv, certFor(t, e.srv, "bob", "devs"))
	expectStatus(t, bob.do("DELETE", ctPath+"/x", ""), 403, metav1.StatusReasonForbidden,
		`crontabs.stable.example.com "x" is forbidden: User "bob" cannot delete resource "crontabs" in API group "stable.example.com" in the namespace "default"`)
	admin2 := newClient(t, e.srv, certFor(t, e.srv, "alice", "system:masters"))
	if r := admin2.do("POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"}}`); r.code != 201 {
		t.Fatalf("system:masters certificate: %d %s", r.code, r.body)
	}
	// A certificate from another CA is 401, not a failed handshake.
	other, _, err := selfSigned("mallory")
	if err != nil {
		t.Fatal(err)
	}
	expectStatus(t, newClient(t, e.srv, other).do("GET", "/readyz", ""), 401, metav1.StatusReasonUnauthorized, "Unauthorized")
}

func TestAnonymousDisabled(t *testing.T) {
	e := start(t, func(c *server.Config) { c.DisableAnonymous = true })
	expectStatus(t, newClient(t, e.srv, tls.Certificate{}).do("GET", "/readyz", ""), 401, metav1.StatusReasonUnauthorized, "Unauthorized")
	if r := e.do("GET", "/readyz", ""); r.code != 200 {
		t.Fatalf("admin: %d %s", r.code, r.body)
	}
}

func TestImpersonation(t *testing.T) {
	e := start(t, func(c *server.Config) { c.TokenAuthFile = writeTokens(t) })
	e.createCRD(cronTabCRD(t))
	// The admin may impersonate anyone; the request is then theirs.
	expectStatus(t, e.do("GET", ctPath, "", "Impersonate-User", "jane"), 403, metav1.StatusReasonForbidden,
		`User "jane" cannot list resource "crontabs"`)
	if r := e.do("GET", ctPath, "", "Impersonate-User", "jane", "Impersonate-Group", "system:masters"); r.code != 200 {
		t.Fatalf("impersonating a member of system:masters: %d %s", r.code, r.body)
	}
	expectStatus(t, e.do("GET", ctPath, "", "Impersonate-Group", "devs"), 400, metav1.StatusReasonBadRequest,
		"requested group devs without impersonating a user")
	// Others may not.
	jane := newClient(t, e.srv, tls.Certificate{})
	jane.token = "jane-token"
	jane.hdr = []string{"Impersonate-User", "root"}
	expectStatus(t, jane.do("GET", ctPath, ""), 403, metav1.StatusReasonForbidden,
		`users "root" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope`)
	jane.hdr = []string{"Impersonate-User", "system:serviceaccount:default:builder"}
	expectStatus(t, jane.do("GET", ctPath, ""), 403, metav1.StatusReasonForbidden,
		`serviceaccounts "builder" is forbidden: User "jane" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "default"`)
}

func TestInsecureHTTP(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Insecure = true })
	if !strings.HasPrefix(e.srv.URL(), "http://") || e.srv.CACert() != nil {
		t.Fatalf("insecure server on %s", e.srv.URL())
	}
	resp, err := http.Get(e.srv.URL() + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("plain HTTP request: %d", resp.StatusCode)
	}
	// Only on loopback addresses.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = server.Start(ctx, server.Config{DataDir: t.TempDir(), Insecure: true, BindAddress: "0.0.0.0"})
	if err == nil || !strings.Contains(err.Error(), "plain HTTP is only served on a loopback address") {
		t.Fatalf("insecure on 0.0.0.0: %v", err)
	}
}

// Client certificates from the operator's own CA (--client-ca-file).
func TestClientCAFile(t *testing.T) {
	dir := t.TempDir()
	other, err := pki.Ensure(filepath.Join(dir, "other"), []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(caFile, other.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *server.Config) { c.ClientCAFile = caFile })
	certPEM, keyPEM, err := other.ClientCert("ops", []string{"system:masters"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if r := newClient(t, e.srv, pair).do("GET", "/api/v1/namespaces", ""); r.code != 200 {
		t.Fatalf("certificate of the operator's CA: %d %s", r.code, r.body)
	}
	// The server's own CA still signs the admin's.
	if r := e.do("GET", "/api/v1/namespaces", ""); r.code != 200 {
		t.Fatalf("admin: %d %s", r.code, r.body)
	}
}
