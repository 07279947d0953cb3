package auth

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// countingAuth accepts the certificate "good" and counts verifications.
type countingAuth struct {
	mu    sync.Mutex
	calls int
}

func (c *countingAuth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	if string(r.TLS.PeerCertificates[0].Raw) != "good" {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: "jane", Groups: []string{"dev"}}}, true, nil
}

func withCert(raw string, notAfter time.Time) *http.Request {
	r, _ := http.NewRequest("GET", "https://127.0.0.1/api", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte(raw), NotAfter: notAfter}}}
	return r
}

func TestCachedCerts(t *testing.T) {
	next := &countingAuth{}
	c := newCachedCerts(next)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	far := now.Add(24 * time.Hour)

	for i := 0; i < 3; i++ {
		resp, ok, err := c.AuthenticateRequest(withCert("good", far))
		if !ok || err != nil || resp.User.GetName() != "jane" {
			t.Fatalf("request %d: %v %v %v", i, resp, ok, err)
		}
		resp.User = &user.DefaultInfo{Name: "changed by a caller"}
	}
	if next.calls != 1 {
		t.Fatalf("a known certificate was verified %d times, want once", next.calls)
	}
	// Failures are verified every time.
	for i := 0; i < 2; i++ {
		if _, ok, _ := c.AuthenticateRequest(withCert("bad", far)); ok {
			t.Fatal("a bad certificate was accepted")
		}
	}
	if next.calls != 3 {
		t.Fatalf("verifications: %d, want 3", next.calls)
	}
	// After the TTL the chain is verified again.
	now = now.Add(certCacheTTL + time.Second)
	c.AuthenticateRequest(withCert("good", far))
	if next.calls != 4 {
		t.Fatalf("verifications after the TTL: %d, want 4", next.calls)
	}
	// A certificate expiring sooner than the TTL is trusted only until then.
	soon := now.Add(time.Minute)
	c2 := newCachedCerts(next)
	c2.now = func() time.Time { return now }
	c2.AuthenticateRequest(withCert("good", soon))
	now = soon.Add(time.Second)
	c2.AuthenticateRequest(withCert("good", soon))
	if next.calls != 6 {
		t.Fatalf("an expired certificate came from the cache (%d verifications, want 6)", next.calls)
	}
	// No client certificate: the next authenticator decides.
	r, _ := http.NewRequest("GET", "https://127.0.0.1/api", nil)
	if _, ok, _ := newCachedCerts(&noCert{}).AuthenticateRequest(r); ok {
		t.Fatal("a request without a certificate was accepted")
	}
}

type noCert struct{}

func (noCert) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return nil, false, nil
}
