package server

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// URL is the server's base URL.
func (s *Server) URL() string { return s.url }

// Handler is the server's whole HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// RESTConfig returns a client-go config for the server with full access
// (the admin client certificate, in group system:masters).
func (s *Server) RESTConfig() *rest.Config {
	c := &rest.Config{Host: s.url, QPS: -1}
	if s.tls != nil {
		c.TLSClientConfig = rest.TLSClientConfig{CAData: s.tls.caPEM, CertData: s.tls.pki.AdminCert, KeyData: s.tls.pki.AdminKey}
	}
	return c
}

// CACert returns the PEM certificates clients trust the server with (nil
// for plain HTTP).
func (s *Server) CACert() []byte {
	if s.tls == nil {
		return nil
	}
	return s.tls.caPEM
}

// ClientCert makes a client certificate for a user and groups, signed by
// the server's CA: a way to give someone access (plain HTTP: an error).
func (s *Server) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	if s.tls == nil {
		return nil, nil, errors.New("the server serves plain HTTP")
	}
	return s.tls.pki.ClientCert(user, groups, time.Now())
}

// KubeconfigPath is where the admin kubeconfig is written.
func (s *Server) KubeconfigPath() string {
	p := filepath.Join(s.cfg.DataDir, "admin.kubeconfig")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// Kubeconfig returns an admin kubeconfig for the server.
func (s *Server) Kubeconfig() ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["crdserver"] = &clientcmdapi.Cluster{Server: s.url}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	if s.tls != nil {
		c.Clusters["crdserver"].CertificateAuthorityData = s.tls.caPEM
		c.AuthInfos["admin"].ClientCertificateData = s.tls.pki.AdminCert
		c.AuthInfos["admin"].ClientKeyData = s.tls.pki.AdminKey
	}
	c.Contexts["crdserver"] = &clientcmdapi.Context{Cluster: "crdserver", AuthInfo: "admin", Namespace: "default"}
	c.CurrentContext = "crdserver"
	return clientcmd.Write(*c)
}

func (s *Server) writeKubeconfig() error {
	b, err := s.Kubeconfig()
	if err != nil {
		return err
	}
	return os.WriteFile(s.KubeconfigPath(), b, 0o600)
}
