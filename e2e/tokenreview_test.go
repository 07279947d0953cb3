package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestMetricsEndpointDelegatesAuth runs a controller-runtime manager whose
// metrics endpoint authenticates and authorizes its scrapers through
// crdserver, as operators built with kubebuilder do: the bearer token in a
// TokenReview, the user's access to /metrics in a SubjectAccessReview.
func TestMetricsEndpointDelegatesAuth(t *testing.T) {
	srv := startServer(t)
	cfg := srv.restConfig(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		sas := kube.CoreV1().ServiceAccounts("monitoring")
		if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, nobody := token("scraper"), token("nobody")
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "scraper"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The delegating authorizer remembers a denial for 30 seconds: scrape
	// once the binding counts.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:monitoring:scraper", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	}); err != nil {
		t.Fatalf("the binding never counted: %v", err)
	}

	// The manager serves metrics over TLS, behind controller-runtime's
	// filter that asks the API server.
	crtSetLogger(t)
	mgr, err := manager.New(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := metricsserver.NewServer(metricsserver.Options{
		BindAddress:    "127.0.0.1:0",
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}, cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(metrics); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	bound, ok := metrics.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("the metrics server (%T) does not say where it listens", metrics)
	}
	var addr string
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		addr = bound.GetBindAddr()
		return addr != "", nil
	}); err != nil {
		t.Fatal("the metrics server never listened")
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // its certificate is self-signed
	defer client.CloseIdleConnections()
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := scrape(scraper); code != http.StatusOK || !strings.Contains(body, "# TYPE ") {
		t.Fatalf("the scraper: %d %.300s", code, body)
	}
	if code, body := scrape(nobody); code != http.StatusForbidden || body != "Authorization denied for user system:serviceaccount:monitoring:nobody\n" {
		t.Fatalf("a ServiceAccount without the role: %d %q", code, body)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized || body != "Unauthorized\n" {
		t.Fatalf("no token: %d %q", code, body)
	}
	// A token that does not authenticate fails the review with its
	// reason, which the filter answers as its own failure.
	if code, body := scrape(scraper[:len(scraper)-4] + "AAAA"); code != http.StatusInternalServerError || body != "Authentication failed\n" {
		t.Fatalf("a tampered token: %d %q", code, body)
	}
}
