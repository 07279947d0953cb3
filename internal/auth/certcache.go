package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// certCacheTTL bounds how long a verified client certificate is trusted
// without verifying it again; its own expiry bounds it too.
const certCacheTTL = 5 * time.Minute

// certCacheSize bounds the cache; when full it starts over.
const certCacheSize = 4096

// cachedCerts remembers the users of client certificate chains it has
// verified. Verifying a chain (an ECDSA or RSA signature check per link)
// cost about a tenth of a small write when done on every request. The TLS
// handshake proved that the client holds the leaf's key, so the same
// chain gives the same answer until it expires; failures are not cached.
type cachedCerts struct {
	next authenticator.Request
	now  func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]certEntry
}

type certEntry struct {
	resp  authenticator.Response
	until time.Time
}

func newCachedCerts(next authenticator.Request) *cachedCerts {
	return &cachedCerts{next: next, now: time.Now, entries: map[[sha256.Size]byte]certEntry{}}
}

func (c *cachedCerts) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return c.next.AuthenticateRequest(r)
	}
	h := sha256.New()
	var n [8]byte
	for _, cert := range r.TLS.PeerCertificates {
		binary.BigEndian.PutUint64(n[:], uint64(len(cert.Raw)))
		h.Write(n[:])
		h.Write(cert.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	now := c.now()
	c.mu.Lock()
	e, hit := c.entries[key]
	c.mu.Unlock()
	if hit && now.Before(e.until) {
		resp := e.resp // a copy: callers may replace its user
		return &resp, true, nil
	}
	resp, ok, err := c.next.AuthenticateRequest(r)
	if !ok || err != nil || resp == nil {
		return resp, ok, err
	}
	until := now.Add(certCacheTTL)
	if notAfter := r.TLS.PeerCertificates[0].NotAfter; notAfter.Before(until) {
		until = notAfter
	}
	c.mu.Lock()
	if len(c.entries) >= certCacheSize {
		c.entries = map[[sha256.Size]byte]certEntry{}
	}
	c.entries[key] = certEntry{resp: *resp, until: until}
	c.mu.Unlock()
	return resp, ok, err
}
