package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/internal/pki"
	"github.com/crdserver/crdserver/server"
)

// A server that delegates authentication to crdserver reads the client CAs
// from kube-system/extension-apiserver-authentication, as from
// kube-apiserver: here with k8s.io/apiserver's own ConfigMap CA controller,
// as a ServiceAccount bound to the default reader role. The bundle holds
// crdserver's CA and the --client-ca-file's, verifies the client
// certificates crdserver issues, and is restored when edited.
func TestAuthenticationConfigMap(t *testing.T) {
	extra, err := pki.EnsureScratch(t.TempDir(), []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, extra.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *server.Config) { c.ClientCAFile = caFile })
	ctx := e.ctx
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agg"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ServiceAccounts("agg").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "apiserver"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.asServiceAccount("agg", "apiserver")
	agg := kubernetes.NewForConfigOrDie(cfg)
	const ns, name = "kube-system", "extension-apiserver-authentication"
	if _, err := agg.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("read before the binding: %v", err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "agg-reads-auth"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "agg", Name: "apiserver"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, func() error { _, err := agg.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); return err })
	// The role names that ConfigMap only.
	if _, err := agg.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("another ConfigMap: %v", err)
	}

	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", ns, name, "client-ca-file", agg)
	if err != nil {
		t.Fatal(err)
	}
	// Run as a delegating server runs it: an informer of that one
	// ConfigMap (a list and watch by metadata.name, which the role's
	// resourceNames allow).
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go ca.Run(runCtx, 1)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(ca.CurrentCABundleContent()) > 0, nil
	}); err != nil {
		t.Fatal("the CA controller read no bundle")
	}
	certs, err := certutil.ParseCertsPEM(ca.CurrentCABundleContent())
	if err != nil || len(certs) != 2 || !bytes.Equal(pemOf(certs[0]), bytes.TrimSpace(e.srv.CACert())) || !bytes.Equal(pemOf(certs[1]), bytes.TrimSpace(extra.CACert)) {
		t.Fatalf("client CAs: %v %d\n%s", err, len(certs), ca.CurrentCABundleContent())
	}
	certPEM, _, err := e.srv.ClientCert("alice", "devs")
	if err != nil {
		t.Fatal(err)
	}
	client, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	opts := ca.VerifyOptions
	verify, ok := opts()
	if !ok {
		t.Fatal("no verify options")
	}
	verify.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := client[0].Verify(verify); err != nil {
		t.Fatalf("crdserver's client certificate against the published CAs: %v", err)
	}

	// An edit that drops crdserver's CA: it is added back after the
	// edit's certificates, which stay.
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["client-ca-file"] = string(extra.CACert)
	if _, err := e.kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := agg.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = cm.Data["client-ca-file"]
		return got == string(extra.CACert)+string(pemOf(certs[0]))+"\n", nil
	}); err != nil {
		t.Fatalf("after the edit: %v\n%s", err, got)
	}
}

func pemOf(c *x509.Certificate) []byte {
	return bytes.TrimSpace(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// A front proxy (kube's aggregator, kube-rbac-proxy) names the user in
// request headers with a client certificate of the
// --requestheader-client-ca-file, as kube-apiserver accepts it; the
// authentication ConfigMap says so under kube's requestheader-* keys.
func TestRequestHeaderAuthentication(t *testing.T) {
	proxyCA, err := pki.EnsureScratch(t.TempDir(), []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, proxyCA.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *server.Config) {
		c.RequestHeader = server.RequestHeaderConfig{ClientCAFile: caFile, AllowedNames: []string{"front-proxy-client"},
			UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}}
	})
	proxyAs := func(cn string, headers map[string][]string) kubernetes.Interface {
		certPEM, keyPEM, err := proxyCA.ClientCert(cn, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(e.cfg)
		cfg.CertData, cfg.KeyData = certPEM, keyPEM
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				for k, v := range headers {
					r.Header[k] = v
				}
				return rt.RoundTrip(r)
			})
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	remote := map[string][]string{"X-Remote-User": {"alice"}, "X-Remote-Group": {"devs", "qa"}, "X-Remote-Extra-Scopes": {"read"}}
	who, err := proxyAs("front-proxy-client", remote).AuthenticationV1().SelfSubjectReviews().Create(e.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := who.Status.UserInfo; u.Username != "alice" || strings.Join(u.Groups, ",") != "devs,qa,system:authenticated" || fmt.Sprint(u.Extra) != "map[scopes:[read]]" {
		t.Fatalf("the proxy's user: %+v", u)
	}
	// A certificate of that CA with another name, or the proxy's own
	// certificate without the headers, authenticates no one.
	for name, c := range map[string]kubernetes.Interface{
		"another name":   proxyAs("someone", remote),
		"no user header": proxyAs("front-proxy-client", nil),
	} {
		if _, err := c.AuthenticationV1().SelfSubjectReviews().Create(e.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); !apierrors.IsUnauthorized(err) {
			t.Fatalf("%s: %v", name, err)
		}
	}

	var data map[string]string
	if err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := e.kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err == nil {
			data = cm.Data
		}
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-ca-file":                     string(e.srv.CACert()),
		"requestheader-client-ca-file":       string(proxyCA.CACert),
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
	if !maps.Equal(data, want) {
		t.Fatalf("ConfigMap data:\n%v\nwant\n%v", data, want)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
