// Package pki keeps the certificates a crdserver serves and is reached
// with: a CA of its own, a serving certificate for the server's addresses
// and names, and an admin client certificate (CN crdserver-admin, O
// system:masters). They are made on first start in a directory of the data
// dir and reused later; a serving certificate that lacks a name asked for,
// or any certificate near its end, is made again with the same CA.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names in the PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	AdminCertFile   = "admin.crt"
	AdminKeyFile    = "admin.key"
)

// AdminUser and AdminGroup name the admin client certificate's subject.
const (
	AdminUser  = "crdserver-admin"
	AdminGroup = "system:masters"
)

const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	// renewBefore is how close to its end a certificate is made again.
	renewBefore = 30 * 24 * time.Hour
)

// Bundle is the PKI of one server, in PEM.
type Bundle struct {
	Dir                     string
	CACert, CAKey           []byte
	ServingCert, ServingKey []byte
	AdminCert, AdminKey     []byte
}

// Path returns the path of one of the bundle's files.
func (b *Bundle) Path(name string) string { return filepath.Join(b.Dir, name) }

// Serving returns the serving certificate for a tls.Config.
func (b *Bundle) Serving() (tls.Certificate, error) {
	return tls.X509KeyPair(b.ServingCert, b.ServingKey)
}

// CA names the files of a CA to sign with instead of the bundle's own:
// replicas given the same CA trust each other's certificates.
type CA struct {
	CertFile, KeyFile string
}

// Ensure loads the PKI in dir, making what is missing, stale, or lacks one
// of hosts (IP addresses or DNS names) in the serving certificate. With
// ca, the leaves are signed by that CA, which is never made again. The
// files it writes are synced to disk.
func Ensure(dir string, hosts []string, now time.Time, ca *CA) (*Bundle, error) {
	return ensure(dir, hosts, now, ca, true)
}

// EnsureScratch is Ensure for a folder thrown away after use (a test
// server's): the files are not synced to disk, which takes a few
// milliseconds each.
func EnsureScratch(dir string, hosts []string, now time.Time, ca *CA) (*Bundle, error) {
	return ensure(dir, hosts, now, ca, false)
}

func ensure(dir string, hosts []string, now time.Time, ca *CA, sync bool) (*Bundle, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b := &Bundle{Dir: dir}
	caCert, caKey, err := load(dir, CACertFile, CAKeyFile)
	if ca != nil {
		caCert, caKey, err = loadCA(ca, now)
	}
	if err != nil {
		return nil, err
	}
	if ca == nil && (caCert == nil || !fresh(caCert, now)) {
		caCert, caKey, err = newCA(now)
		if err != nil {
			return nil, err
		}
		if err := write(dir, CACertFile, CAKeyFile, caCert, caKey, sync); err != nil {
			return nil, err
		}
		// A new CA makes every leaf stale.
		_ = os.Remove(filepath.Join(dir, ServingCertFile))
		_ = os.Remove(filepath.Join(dir, AdminCertFile))
	}
	b.CACert, b.CAKey = encodeCert(caCert), mustEncodeKey(caKey)

	serving, servingKey, err := load(dir, ServingCertFile, ServingKeyFile)
	if err != nil {
		return nil, err
	}
	if serving == nil || !fresh(serving, now) || !signedBy(serving, caCert) || !covers(serving, hosts) {
		serving, servingKey, err = newLeaf(caCert, caKey, now, pkix.Name{CommonName: "crdserver"}, x509.ExtKeyUsageServerAuth, hosts)
		if err != nil {
			return nil, err
		}
		if err := write(dir, ServingCertFile, ServingKeyFile, serving, servingKey, sync); err != nil {
			return nil, err
		}
	}
	b.ServingCert, b.ServingKey = encodeCert(serving), mustEncodeKey(servingKey)

	admin, adminKey, err := load(dir, AdminCertFile, AdminKeyFile)
	if err != nil {
		return nil, err
	}
	if admin == nil || !fresh(admin, now) || !signedBy(admin, caCert) {
		admin, adminKey, err = newLeaf(caCert, caKey, now, pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}}, x509.ExtKeyUsageClientAuth, nil)
		if err != nil {
			return nil, err
		}
		if err := write(dir, AdminCertFile, AdminKeyFile, admin, adminKey, sync); err != nil {
			return nil, err
		}
	}
	b.AdminCert, b.AdminKey = encodeCert(admin), mustEncodeKey(adminKey)
	return b, nil
}

// loadCA reads the operator's CA and checks that it can sign.
func loadCA(ca *CA, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(ca.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate %s: %w", ca.CertFile, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key %s: %w", ca.KeyFile, err)
	}
	switch {
	case !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, nil, fmt.Errorf("%s is not a CA certificate that can sign certificates", ca.CertFile)
	case !publicKeysEqual(cert.PublicKey, key.Public()):
		return nil, nil, fmt.Errorf("%s is not the key of %s", ca.KeyFile, ca.CertFile)
	case now.After(cert.NotAfter):
		return nil, nil, fmt.Errorf("the CA certificate %s expired on %s", ca.CertFile, cert.NotAfter.Format(time.RFC3339))
	}
	return cert, key, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// ClientCert makes a client certificate signed by the bundle's CA, for a
// user and groups (tests and operators giving someone access).
func (b *Bundle) ClientCert(user string, groups []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, err := parseCert(b.CACert)
	if err != nil {
		return nil, nil, err
	}
	key, err := parseKey(b.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cert, leafKey, err := newLeaf(ca, key, now, pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(cert), mustEncodeKey(leafKey), nil
}

func fresh(c *x509.Certificate, now time.Time) bool {
	return now.After(c.NotBefore) && now.Add(renewBefore).Before(c.NotAfter)
}

func signedBy(c, ca *x509.Certificate) bool {
	return c.CheckSignatureFrom(ca) == nil
}

// covers reports whether a serving certificate names every host.
func covers(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	return true
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) }

func newCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("crdserver-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func newLeaf(ca *x509.Certificate, caKey crypto.Signer, now time.Time, subject pkix.Name, usage x509.ExtKeyUsage, hosts []string) (*x509.Certificate, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// load reads a certificate and its key; both nil if either is missing.
func load(dir, certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, certFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, keyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, certFile), err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, keyFile), err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		// A start cut off between writing a key and its certificate:
		// make the pair again.
		return nil, nil, nil
	}
	return cert, key, nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(p)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(p []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(p)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("unsupported private key")
		}
		return s, nil
	}
	return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func mustEncodeKey(k crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // only keys this package made or parsed reach here
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// write stores a certificate (0644) and its key (0600), each replaced
// atomically.
func write(dir, certFile, keyFile string, cert *x509.Certificate, key crypto.Signer, sync bool) error {
	if err := writeAtomic(filepath.Join(dir, keyFile), mustEncodeKey(key), 0o600, sync); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, certFile), encodeCert(cert), 0o644, sync)
}

// writeAtomic writes path through a temporary file renamed into place,
// synced to disk first when sync is set.
func writeAtomic(path string, data []byte, mode os.FileMode, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
