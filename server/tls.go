package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crdserver/crdserver/internal/pki"
)

// tlsSetup is what a TLS server serves with and trusts.
type tlsSetup struct {
	pki       *pki.Bundle
	serving   tls.Certificate
	clientCAs *x509.CertPool
	// caPEM is what clients trust the serving certificate with.
	caPEM []byte
	// clientCAPEM holds the CAs in clientCAs, for servers that delegate
	// authentication to this one.
	clientCAPEM []byte
	// proxyCAs verify front proxies' client certificates (nil: no
	// request header authentication); proxyCAPEM holds them.
	proxyCAs   *x509.CertPool
	proxyCAPEM []byte
}

// setupTLS makes or loads the PKI in DataDir/pki and reads the operator's
// certificates.
func setupTLS(cfg Config) (*tlsSetup, error) {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if ip := net.ParseIP(cfg.BindAddress); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, ip.String())
	}
	if cfg.AdvertiseAddress != "" {
		hosts = append(hosts, cfg.AdvertiseAddress)
	}
	hosts = append(hosts, cfg.TLSSANs...)
	var ca *pki.CA
	switch {
	case cfg.CACertFile != "" && cfg.CAKeyFile != "":
		ca = &pki.CA{CertFile: cfg.CACertFile, KeyFile: cfg.CAKeyFile}
	case cfg.CACertFile != "" || cfg.CAKeyFile != "":
		return nil, errors.New("--ca-cert-file and --ca-key-file go together")
	}
	ensure := pki.Ensure
	if cfg.EtcdNoFsync {
		ensure = pki.EnsureScratch
	}
	bundle, err := ensure(filepath.Join(cfg.DataDir, "pki"), dedupe(hosts), time.Now(), ca)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	t := &tlsSetup{pki: bundle, clientCAs: x509.NewCertPool(), caPEM: bundle.CACert, clientCAPEM: bundle.CACert}
	t.clientCAs.AppendCertsFromPEM(bundle.CACert)
	switch {
	case cfg.TLSCertFile != "" && cfg.TLSKeyFile != "":
		if t.serving, err = tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
		}
		// Clients trust the top of the operator's chain.
		certPEM, _ := os.ReadFile(cfg.TLSCertFile)
		t.caPEM = lastCert(certPEM)
	case cfg.TLSCertFile != "" || cfg.TLSKeyFile != "":
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	default:
		if t.serving, err = bundle.Serving(); err != nil {
			return nil, err
		}
	}
	if cfg.ClientCAFile != "" {
		data, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		if !t.clientCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--client-ca-file %s holds no PEM certificate", cfg.ClientCAFile)
		}
		t.clientCAPEM = append(append(append([]byte{}, t.clientCAPEM...), '\n'), data...)
	}
	if f := cfg.RequestHeader.ClientCAFile; f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--requestheader-client-ca-file: %w", err)
		}
		t.proxyCAs = x509.NewCertPool()
		if !t.proxyCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--requestheader-client-ca-file %s holds no PEM certificate", f)
		}
		t.proxyCAPEM = data
	}
	return t, nil
}

// serverConfig is the TLS configuration of the listener. Client
// certificates are asked for but checked by authentication, so a bad one
// is a 401 as in Kubernetes rather than a failed handshake.
func (t *tlsSetup) serverConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.serving},
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

func lastCert(chain []byte) []byte {
	var last []byte
	for {
		var block *pem.Block
		block, chain = pem.Decode(chain)
		if block == nil {
			return last
		}
		if block.Type == "CERTIFICATE" {
			last = pem.EncodeToMemory(block)
		}
	}
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// isLoopback says whether a bind address only accepts local connections.
func isLoopback(addr string) bool {
	if addr == "localhost" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}
