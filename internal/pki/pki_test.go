package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnsureMakesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	now := time.Now()
	b, err := Ensure(dir, []string{"127.0.0.1", "::1", "localhost"}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile} {
		st, err := os.Stat(b.Path(f))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(f) == ".key" && st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f, st.Mode().Perm())
		}
	}
	admin, _ := parseCert(b.AdminCert)
	if admin.Subject.CommonName != AdminUser || len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != AdminGroup {
		t.Fatalf("admin subject %v", admin.Subject)
	}
	// A second start reuses everything.
	again, err := Ensure(dir, []string{"127.0.0.1", "localhost"}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CACert, b.CACert) || !bytes.Equal(again.ServingCert, b.ServingCert) || !bytes.Equal(again.AdminCert, b.AdminCert) {
		t.Fatal("certificates made again on a second start")
	}
	// A new name makes a new serving certificate from the same CA.
	third, err := Ensure(dir, []string{"127.0.0.1", "crdserver.example"}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(third.CACert, b.CACert) || bytes.Equal(third.ServingCert, b.ServingCert) || !bytes.Equal(third.AdminCert, b.AdminCert) {
		t.Fatal("a new SAN should renew only the serving certificate")
	}
	serving, _ := parseCert(third.ServingCert)
	if err := serving.VerifyHostname("crdserver.example"); err != nil {
		t.Fatal(err)
	}
	// Near its end, a certificate is made again.
	later, err := Ensure(dir, []string{"127.0.0.1"}, now.Add(leafLifetime-renewBefore/2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(later.AdminCert, b.AdminCert) || bytes.Equal(later.ServingCert, third.ServingCert) {
		t.Fatal("certificates near their end were not renewed")
	}
}

func TestEnsureRepairsAHalfWrittenPair(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The serving key from another pair: as if a start stopped between
	// writing the key and the certificate.
	if err := os.WriteFile(b.Path(ServingKeyFile), b.AdminKey, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Ensure(dir, []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Serving(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.Path(CACertFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, nil, time.Now(), nil); err == nil {
		t.Fatal("a corrupt CA certificate was accepted")
	}
}

// A TLS handshake with the serving certificate and the admin client
// certificate, both checked against the CA.
func TestHandshake(t *testing.T) {
	b, err := Ensure(t.TempDir(), []string{"127.0.0.1", "::1", "localhost"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CACert)
	serving, err := b.Serving()
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.Listener, _ = net.Listen("tcp", "127.0.0.1:0")
	srv.StartTLS()
	defer srv.Close()

	user, key, err := b.ClientCert("jane", []string{"devs"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2][]byte{{b.AdminCert, b.AdminKey}, {user, key}} {
		cert, err := tls.X509KeyPair(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if seen != "jane" {
		t.Fatalf("last client was %q", seen)
	}
}

func TestEnsureWithOperatorCA(t *testing.T) {
	now := time.Now()
	// An operator's CA, made here with our own helper, in another folder.
	opDir := t.TempDir()
	caCert, caKey, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(opDir, "ca.crt", "ca.key", caCert, caKey, true); err != nil {
		t.Fatal(err)
	}
	ca := &CA{CertFile: filepath.Join(opDir, "ca.crt"), KeyFile: filepath.Join(opDir, "ca.key")}
	// Two replicas' data dirs: both sign with it, so each trusts the other.
	a, err := Ensure(t.TempDir(), []string{"127.0.0.1"}, now, ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Ensure(t.TempDir(), []string{"127.0.0.1"}, now, ca)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CACert, b.CACert) {
		t.Fatal("replicas given one CA report different CAs")
	}
	for _, leaf := range [][]byte{a.ServingCert, b.AdminCert} {
		c, err := parseCert(leaf)
		if err != nil || !signedBy(c, caCert) {
			t.Fatalf("a leaf not signed by the operator's CA: %v", err)
		}
	}
	// A data dir that had its own CA switches to the operator's.
	dir := t.TempDir()
	if _, err := Ensure(dir, []string{"127.0.0.1"}, now, nil); err != nil {
		t.Fatal(err)
	}
	c, err := Ensure(dir, []string{"127.0.0.1"}, now, ca)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := parseCert(c.ServingCert); !signedBy(s, caCert) {
		t.Fatal("the serving certificate was not made again with the operator's CA")
	}
	// Refused: a key of another CA, a certificate that is not a CA.
	_, otherKey, _ := newCA(now)
	if err := write(opDir, "ca2.crt", "other.key", caCert, otherKey, true); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(t.TempDir(), nil, now, &CA{CertFile: ca.CertFile, KeyFile: filepath.Join(opDir, "other.key")}); err == nil || !strings.Contains(err.Error(), "is not the key of") {
		t.Fatalf("mismatched key: %v", err)
	}
	if _, err := Ensure(t.TempDir(), nil, now, &CA{CertFile: filepath.Join(dir, ServingCertFile), KeyFile: filepath.Join(dir, ServingKeyFile)}); err == nil || !strings.Contains(err.Error(), "not a CA certificate") {
		t.Fatalf("a leaf as CA: %v", err)
	}
}
