package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
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
	tr, err := e.kube.CoreV1().ServiceAccounts("agg").CreateToken(ctx, "apiserver", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(e.cfg)
	cfg.BearerToken = tr.Status.Token
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
