// Package integration tests a whole crdserver, started in-process on a
// random loopback port with an embedded etcd in a temp dir, through real
// clients (client-go) and raw HTTP where status codes, bodies and headers
// matter.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/server"
)

type env struct {
	t    *testing.T
	srv  *server.Server
	cfg  *rest.Config
	dyn  dynamic.Interface
	kube kubernetes.Interface
	ext  apiextensionsclient.Interface
	ctx  context.Context
	// rt sends raw requests as the admin.
	rt http.RoundTripper
}

// start runs a server for one test: crdtest's, with the server's
// configuration changed by mutate.
func start(t *testing.T, mutate ...func(*server.Config)) *env {
	t.Helper()
	ts := crdtest.Start(t, crdtest.Options{
		Server: func(cfg *server.Config) {
			for _, m := range mutate {
				m(cfg)
			}
		},
		Timeout: 2 * time.Minute,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	rc := ts.Config
	e := &env{t: t, srv: ts.Server, cfg: rc, ctx: ctx}
	e.dyn = dynamic.NewForConfigOrDie(rc)
	e.kube = kubernetes.NewForConfigOrDie(rc)
	e.ext = apiextensionsclient.NewForConfigOrDie(rc)
	rt, err := rest.TransportFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	// Idle HTTP/2 connections would hold the server's shutdown for a
	// second (its GOAWAY timeout): the clients let go first.
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(rt) })
	return e
}

// fixtureCRD reads the CRD of testdata/name.yaml.
func fixtureCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return readCRD(t, filepath.Join("testdata", name+".yaml"))
}

// cronTabCRD reads the README's CronTab CRD (examples/crontab-crd.yaml),
// which e2e and most tests here use.
func cronTabCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return readCRD(t, filepath.Join("..", "examples", "crontab-crd.yaml"))
}

// readCRD reads the one CRD of a file.
func readCRD(t testing.TB, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := crdtest.ReadCRDs([]string{file}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 {
		t.Fatalf("%s has %d CRDs, want 1", file, len(crds))
	}
	return crds[0]
}

// createCRD creates a CRD and waits until it is Established.
func (e *env) createCRD(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	out, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create CRD %s: %v", crd.Name, err)
	}
	return e.waitEstablished(out.Name)
}

// waitEstablished waits (10s at most) until the CRD is Established.
func (e *env) waitEstablished(name string) *apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	crds, err := crdtest.WaitEstablished(ctx, e.cfg, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return crds[0]
}

var crontabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// response is a raw HTTP answer.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) status(t *testing.T) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body is not a Status (%v): %s", err, r.body)
	}
	return st
}

func (r response) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON (%v): %s", err, r.body)
	}
	return m
}

// do sends a raw request as the admin; headers come in pairs.
func (e *env) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	return e.doWith(e.rt, method, path, body, headers...)
}

// doWith sends a raw request through rt; headers come in pairs.
func (e *env) doWith(rt http.RoundTripper, method, path, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.srv.URL()+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// expectStatus checks an error response.
func expectStatus(t *testing.T, r response, code int, reason metav1.StatusReason, msgPart string) metav1.Status {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %d, want %d: %s", r.code, code, r.body)
	}
	st := r.status(t)
	if st.Code != int32(code) || st.Reason != reason || !strings.Contains(st.Message, msgPart) || st.Status != metav1.StatusFailure {
		t.Fatalf("got Status %+v, want code %d reason %q message containing %q", st, code, reason, msgPart)
	}
	return st
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

var _ = apierrors.IsNotFound

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// warningRecorder is a client-go warning handler.
type warningRecorder func(msg string)

func (w warningRecorder) HandleWarningHeader(code int, agent, msg string) { w(msg) }

func newDynamic(cfg *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(cfg) }

// editAndView are clients of two ServiceAccounts of namespace default,
// edit-sa and view-sa, bound there to the default edit and view
// ClusterRoles.
func (e *env) editAndView() (edit, view kubernetes.Interface) {
	e.t.Helper()
	for _, role := range []string{"edit", "view"} {
		if _, err := e.kube.CoreV1().ServiceAccounts("default").Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: role + "-sa"}}, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role + "-sa"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: role + "-sa", Namespace: "default"}},
		}
		if _, err := e.kube.RbacV1().RoleBindings("default").Create(e.ctx, rb, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return kubernetes.NewForConfigOrDie(e.asServiceAccount("default", "edit-sa")), kubernetes.NewForConfigOrDie(e.asServiceAccount("default", "view-sa"))
}

// asServiceAccount is a client configuration that authenticates with a
// token of the ServiceAccount ns/name, which must exist.
func (e *env) asServiceAccount(ns, name string) *rest.Config {
	e.t.Helper()
	tr, err := e.kube.CoreV1().ServiceAccounts(ns).CreateToken(e.ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(e.cfg)
	cfg.BearerToken = tr.Status.Token
	return cfg
}
