package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/crdserver/crdserver/internal/pki"
	"github.com/crdserver/crdserver/server"
)

const (
	wardleGroup   = "wardle.example.com"
	wardleVersion = "v1alpha1"
	wardleGV      = wardleGroup + "/" + wardleVersion
	wardleName    = wardleVersion + "." + wardleGroup
)

var flundersGVR = schema.GroupVersionResource{Group: wardleGroup, Version: wardleVersion, Resource: "flunders"}

// seen is what a backend saw of one request.
type seen struct {
	method, path, query string
	user                string
	groups              []string
	extra               map[string][]string
	clientCN            string
}

// backend is an aggregated API server for wardle.example.com/v1alpha1 in
// the test process: TLS for api.default.svc, client certificates of the
// front-proxy CA required; it answers discovery, a list, a create, a
// watch and its OpenAPI v3 document, and records who asked. While down,
// it answers 503.
type backend struct {
	addr   string
	caPEM  []byte
	up     atomic.Bool
	mu     sync.Mutex
	record []seen
}

func (b *backend) last(t *testing.T, path string) seen {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.record) - 1; i >= 0; i-- {
		if b.record[i].path == path {
			return b.record[i]
		}
	}
	t.Fatalf("the backend saw no request for %s", path)
	return seen{}
}

func startBackend(t *testing.T, proxyCA []byte) *backend {
	t.Helper()
	pkiDir := t.TempDir()
	serving, err := pki.EnsureScratch(pkiDir, []string{"api.default.svc"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := serving.Serving()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(proxyCA) {
		t.Fatal("proxy CA")
	}
	b := &backend{caPEM: serving.CACert}
	b.up.Store(true)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, user: r.Header.Get("X-Remote-User"), groups: r.Header.Values("X-Remote-Group"), extra: map[string][]string{}}
	for k, v := range r.Header {
		if rest, ok := strings.CutPrefix(k, "X-Remote-Extra-"); ok {
			s.extra[strings.ToLower(rest)] = v
		}
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		s.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	b.mu.Lock()
	b.record = append(b.record, s)
	b.mu.Unlock()
	if !b.up.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	write := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	flunder := func(name string) map[string]any {
		return map[string]any{"apiVersion": wardleGV, "kind": "Flunder", "metadata": map[string]any{"name": name, "namespace": "default", "resourceVersion": "1",
			"annotations": map[string]any{"seen-user": s.user}}}
	}
	switch p := r.URL.Path; {
	case p == "/apis/"+wardleGV+"/namespaces/default/flunders/one/exec" && r.Header.Get("Upgrade") == "echo":
		// An upgrade: the connection echoes lines back, prefixed by
		// the user it was upgraded for.
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = rw.WriteString(s.user + ":" + line)
		_ = rw.Flush()
	case p == "/apis":
		write(http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
	case p == "/apis/"+wardleGV:
		write(http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: wardleGV,
			APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"create", "get", "list", "watch"}}}})
	case p == "/apis/"+wardleGV+"/namespaces/default/flunders" && r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "ADDED", "object": flunder("watched")})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case p == "/apis/"+wardleGV+"/namespaces/default/flunders" && r.Method == http.MethodGet:
		write(http.StatusOK, map[string]any{"apiVersion": wardleGV, "kind": "FlunderList", "metadata": map[string]any{"resourceVersion": "1"}, "items": []any{flunder("one")}})
	case p == "/apis/"+wardleGV+"/namespaces/default/flunders" && r.Method == http.MethodPost:
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := flunder(obj["metadata"].(map[string]any)["name"].(string))
		write(http.StatusCreated, out)
	case p == "/openapi/v3":
		write(http.StatusOK, map[string]any{"paths": map[string]any{"apis/" + wardleGV: map[string]any{"serverRelativeURL": "/openapi/v3/apis/" + wardleGV + "?hash=WARDLE"}}})
	case p == "/openapi/v3/apis/"+wardleGV:
		write(http.StatusOK, map[string]any{"openapi": "3.0.0", "info": map[string]any{"title": "Wardle", "version": wardleVersion}, "paths": map[string]any{}})
	default:
		http.NotFound(w, r)
	}
}

// aggregatorEnv is a crdserver that proxies to a backend: the front-proxy
// client certificate, and the service default/api:443 at the backend.
func aggregatorEnv(t *testing.T) (*env, *backend, aggregatorclient.Interface) {
	t.Helper()
	proxyPKI, err := pki.EnsureScratch(t.TempDir(), []string{"127.0.0.1"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := proxyPKI.ClientCert("front-proxy-client", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBackend(t, proxyPKI.CACert)
	e := start(t, func(c *server.Config) {
		c.Conversion.ServiceAddresses = map[string]string{"default/api:443": b.addr}
		c.Aggregator = server.AggregatorOptions{ProxyClientCertFile: certFile, ProxyClientKeyFile: keyFile, AvailabilityRecheck: 100 * time.Millisecond}
	})
	return e, b, aggregatorclient.NewForConfigOrDie(e.cfg)
}

func wardleAPIService(caBundle []byte) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: wardleName},
		Spec: apiregistrationv1.APIServiceSpec{Group: wardleGroup, Version: wardleVersion, GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service: &apiregistrationv1.ServiceReference{Namespace: "default", Name: "api"}, CABundle: caBundle},
	}
}

// waitAvailable waits for an APIService's Available condition to have a
// status and reason, and returns the condition.
func waitAvailable(t *testing.T, ctx context.Context, c aggregatorclient.Interface, name string, status apiregistrationv1.ConditionStatus, reason string) apiregistrationv1.APIServiceCondition {
	t.Helper()
	var last *apiregistrationv1.APIServiceCondition
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		api, err := c.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = helper.GetAPIServiceConditionByType(api, apiregistrationv1.Available)
		return last != nil && last.Status == status && last.Reason == reason, nil
	}); err != nil {
		t.Fatalf("%s: Available %+v, want %s %s: %v", name, last, status, reason, err)
	}
	return *last
}

// APIServices are created, defaulted, validated, listed as kubectl
// shows them and have their status written as kube-apiserver's are;
// local ones exist for what the server serves itself.
func TestAPIServiceAPI(t *testing.T) {
	e := start(t)
	ctx := e.ctx
	agg := aggregatorclient.NewForConfigOrDie(e.cfg).ApiregistrationV1().APIServices()

	// Invalid ones, with kube-apiserver v1.37's messages.
	bad := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.wrong.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "Bad_Group", Version: "1v", VersionPriority: 2000, CABundle: []byte("foo"), InsecureSkipTLSVerify: true,
			Service: &apiregistrationv1.ServiceReference{Port: ptr(int32(70000))}},
	}
	_, err := agg.Create(ctx, bad, metav1.CreateOptions{})
	want := `APIService.apiregistration.k8s.io "v1.wrong.example.com" is invalid: [metadata.name: Invalid value: "v1.wrong.example.com": must be ` + "`" + `spec.version+"."+spec.group` + "`" + `: "1v.Bad_Group", ` +
		`spec.group: Invalid value: "Bad_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), ` +
		`spec.version: Invalid value: "1v": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), ` +
		`spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, spec.versionPriority: Invalid value: 2000: must be positive and less than 1000, ` +
		`spec.service.namespace: Required value, spec.service.name: Required value, spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive, ` +
		`spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present]`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Fatalf("invalid APIService:\n got %v\nwant %s", err, want)
	}
	local := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v2.local.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "local.example.com", Version: "v2", GroupPriorityMinimum: 100, VersionPriority: 10, CABundle: []byte("foo"), InsecureSkipTLSVerify: true}}
	_, err = agg.Create(ctx, local, metav1.CreateOptions{})
	if want := `APIService.apiregistration.k8s.io "v2.local.example.com" is invalid: [spec.caBundle: Invalid value: "3 bytes": local APIServices may not have a caBundle, spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify]`; err == nil || err.Error() != want {
		t.Fatalf("local APIService with TLS settings: %v", err)
	}
	if _, err := agg.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "a/b"}, Spec: apiregistrationv1.APIServiceSpec{Group: "x.y", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10}}, metav1.CreateOptions{}); err == nil ||
		err.Error() != `APIService.apiregistration.k8s.io "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'` {
		t.Fatalf("name with a slash: %v", err)
	}

	// A valid one: the port defaults to 443, a status sent is dropped.
	api := wardleAPIService(nil)
	api.Spec.InsecureSkipTLSVerify = true
	api.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue, Reason: "Mine"}}
	created, err := agg.Create(ctx, api, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := created.Spec.Service.Port; p == nil || *p != 443 {
		t.Fatalf("port %v, want 443", p)
	}
	if c := helper.GetAPIServiceConditionByType(created, apiregistrationv1.Available); c != nil && c.Reason == "Mine" {
		t.Fatalf("the status sent on create was kept: %+v", c)
	}
	// Its service is not where services are listed.
	cond := waitAvailable(t, ctx, aggregatorclient.NewForConfigOrDie(e.cfg), wardleName, apiregistrationv1.ConditionFalse, "ServiceNotFound")
	if cond.Message != `service/api in "default" is not present` {
		t.Fatalf("message %q", cond.Message)
	}
	// The spec cannot be changed through status, nor a condition given
	// an unknown status.
	cur, err := agg.Get(ctx, wardleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.VersionPriority = 99
	cur.Status.Conditions = append(cur.Status.Conditions, apiregistrationv1.APIServiceCondition{Type: "Other", Status: "Maybe"})
	if _, err := agg.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil ||
		err.Error() != `APIService.apiregistration.k8s.io "v1alpha1.wardle.example.com" is invalid: status.conditions[1].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"` {
		t.Fatalf("status update with an unknown condition status: %v", err)
	}

	// kubectl's table.
	r := e.do(http.MethodGet, "/apis/apiregistration.k8s.io/v1/apiservices/"+wardleName, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); err != nil || r.code != http.StatusOK {
		t.Fatalf("table: %d %v %s", r.code, err, r.body)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Service,Available,Age" || len(tbl.Rows) != 1 ||
		fmt.Sprint(tbl.Rows[0].Cells[:3]) != "[v1alpha1.wardle.example.com default/api False (ServiceNotFound)]" {
		t.Fatalf("table %v %v", cols, tbl.Rows)
	}

	// The local APIServices: built-in group/versions with kube's
	// priorities, and CRDs' while they are served.
	var coordination *apiregistrationv1.APIService
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		coordination, err = agg.Get(ctx, "v1.coordination.k8s.io", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("v1.coordination.k8s.io: %v", err)
	}
	if coordination.Spec.Service != nil || coordination.Spec.GroupPriorityMinimum != 16500 || coordination.Spec.VersionPriority != 15 ||
		coordination.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" || !helper.IsAPIServiceConditionTrue(coordination, apiregistrationv1.Available) {
		t.Fatalf("v1.coordination.k8s.io: %+v", coordination)
	}
	if c := helper.GetAPIServiceConditionByType(coordination, apiregistrationv1.Available); c.Reason != "Local" || c.Message != "Local APIServices are always available" {
		t.Fatalf("local condition %+v", c)
	}
	crd := e.createCRD(cronTabCRD(t))
	var crdAPI *apiregistrationv1.APIService
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		crdAPI, err = agg.Get(ctx, "v1.stable.example.com", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the CRD's APIService: %v", err)
	}
	if crdAPI.Spec.GroupPriorityMinimum != 1000 || crdAPI.Spec.VersionPriority != 100 || crdAPI.Labels["kube-aggregator.kubernetes.io/automanaged"] != "true" {
		t.Fatalf("the CRD's APIService: %+v", crdAPI)
	}
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := agg.Get(ctx, "v1.stable.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("the deleted CRD's APIService stayed")
	}

	if err := agg.Delete(ctx, wardleName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Server-side apply defaults what it makes, as a request body: an
	// applied service without a port gets 443, and keeps it when applied
	// again.
	apiservices := e.dyn.Resource(apiregistrationv1.SchemeGroupVersion.WithResource("apiservices"))
	for _, prio := range []int64{15, 16} {
		applied, err := apiservices.Apply(ctx, wardleName, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": wardleName},
			"spec": map[string]any{"group": wardleGroup, "version": wardleVersion, "groupPriorityMinimum": int64(1000), "versionPriority": prio,
				"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "default", "name": "api"}},
		}}, metav1.ApplyOptions{FieldManager: "test", Force: true})
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		if port, _, _ := unstructured.NestedInt64(applied.Object, "spec", "service", "port"); port != 443 {
			t.Fatalf("applied port %d, want 443", port)
		}
	}
}

// An APIService with a service is proxied to its server with the
// front-proxy identity of the user, once available; discovery,
// aggregated discovery and OpenAPI v3 list it; when its server fails its
// check it goes unavailable and requests are 503.
func TestAPIServiceProxy(t *testing.T) {
	e, b, agg := aggregatorEnv(t)
	ctx := e.ctx
	b.up.Store(false)
	if _, err := agg.ApiregistrationV1().APIServices().Create(ctx, wardleAPIService(b.caPEM), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The backend answers 503: the discovery check fails, as kube's words
	// it, and requests are refused as kube-aggregator refuses them.
	cond := waitAvailable(t, ctx, agg, wardleName, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck")
	u := "https://" + b.addr + "/apis/" + wardleGV
	if want := fmt.Sprintf("failing or missing response from %s: bad status from %s: 503", u, u); cond.Message != want {
		t.Fatalf("message %q, want %q", cond.Message, want)
	}
	r := e.do(http.MethodGet, "/apis/"+wardleGV+"/namespaces/default/flunders", "")
	if r.code != http.StatusServiceUnavailable || string(r.body) != "service unavailable\n" {
		t.Fatalf("unavailable: %d %s", r.code, r.body)
	}
	_, err := e.dyn.Resource(flundersGVR).Namespace("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("client-go's list while unavailable: %v", err)
	}

	b.up.Store(true)
	waitAvailable(t, ctx, agg, wardleName, apiregistrationv1.ConditionTrue, "Passed")
	check := b.last(t, "/apis/"+wardleGV)
	if check.user != "system:kube-aggregator" || !slices.Equal(check.groups, []string{"system:masters"}) || check.clientCN != "front-proxy-client" {
		t.Fatalf("the check's identity: %+v", check)
	}

	// list, get-as-list, create and watch reach the backend as the
	// admin, with the proxy's client certificate.
	var list *unstructured.UnstructuredList
	waitAllowed(t, func() (err error) {
		list, err = e.dyn.Resource(flundersGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err
	})
	if len(list.Items) != 1 || list.Items[0].GetName() != "one" {
		t.Fatalf("list: %+v", list.Items)
	}
	got := b.last(t, "/apis/"+wardleGV+"/namespaces/default/flunders")
	if got.user != "crdserver-admin" || !slices.Contains(got.groups, "system:masters") || !slices.Contains(got.groups, "system:authenticated") || got.clientCN != "front-proxy-client" {
		t.Fatalf("the list's identity: %+v", got)
	}
	created, err := e.dyn.Resource(flundersGVR).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": wardleGV, "kind": "Flunder", "metadata": map[string]any{"name": "new"}}}, metav1.CreateOptions{})
	if err != nil || created.GetName() != "new" || created.GetAnnotations()["seen-user"] != "crdserver-admin" {
		t.Fatalf("create: %v %+v", err, created)
	}
	w, err := e.dyn.Resource(flundersGVR).Namespace("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "watched" {
			t.Fatalf("watch event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	w.Stop()

	// An upgraded connection passes through, for the same user.
	tc, err := rest.TLSConfigFor(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(e.srv.URL(), "https://"), tc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /apis/%s/namespaces/default/flunders/one/exec HTTP/1.1\r\nHost: crdserver\r\nConnection: Upgrade\r\nUpgrade: echo\r\nContent-Length: 0\r\n\r\n", wardleGV)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %+v", err, resp)
	}
	fmt.Fprint(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "crdserver-admin:ping\n" {
		t.Fatalf("upgraded connection: %q %v", line, err)
	}

	// A ServiceAccount without RBAC is refused by crdserver before the backend hears of it.
	if _, err := e.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	botDyn, err := newDynamic(e.asServiceAccount("default", "bot"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := botDyn.Resource(flundersGVR).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("unauthorized list: %v", err)
	}
	if got := b.last(t, "/apis/"+wardleGV+"/namespaces/default/flunders"); got.user != "crdserver-admin" {
		t.Fatalf("the backend heard a refused request: %+v", got)
	}

	// Discovery lists the group, its version preferred, and its
	// resources (the backend's, fetched as kube fetches them).
	groups, err := e.kube.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var wardle *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == wardleGroup {
			wardle = &groups.Groups[i]
		}
	}
	if wardle == nil || wardle.PreferredVersion.GroupVersion != wardleGV {
		t.Fatalf("/apis: %+v", groups.Groups)
	}
	rl, err := e.kube.Discovery().ServerResourcesForGroupVersion(wardleGV)
	if err != nil || len(rl.APIResources) != 1 || rl.APIResources[0].Name != "flunders" {
		t.Fatalf("/apis/%s: %v %+v", wardleGV, err, rl)
	}
	r = e.do(http.MethodGet, "/apis/"+wardleGroup, "")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"preferredVersion":{"groupVersion":"`+wardleGV+`"`) {
		t.Fatalf("/apis/%s: %d %s", wardleGroup, r.code, r.body)
	}
	r = e.do(http.MethodGet, "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	var disc apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(r.body, &disc); err != nil {
		t.Fatalf("aggregated discovery: %v %s", err, r.body)
	}
	var found *apidiscoveryv2.APIVersionDiscovery
	for _, g := range disc.Items {
		if g.Name == wardleGroup && len(g.Versions) == 1 {
			found = &g.Versions[0]
		}
	}
	if found == nil || found.Version != wardleVersion || found.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(found.Resources) != 1 ||
		found.Resources[0].Resource != "flunders" || found.Resources[0].Scope != apidiscoveryv2.ScopeNamespace {
		t.Fatalf("aggregated discovery of %s: %+v", wardleGroup, found)
	}

	// OpenAPI v3 lists the backend's document, which is proxied.
	r = e.do(http.MethodGet, "/openapi/v3", "")
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &root); err != nil || root.Paths["apis/"+wardleGV].ServerRelativeURL != "/openapi/v3/apis/"+wardleGV+"?hash=WARDLE" || root.Paths["api/v1"].ServerRelativeURL == "" {
		t.Fatalf("/openapi/v3: %v %s", err, r.body)
	}
	r = e.do(http.MethodGet, root.Paths["apis/"+wardleGV].ServerRelativeURL, "")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"title":"Wardle"`) {
		t.Fatalf("the backend's document: %d %s", r.code, r.body)
	}

	// The backend fails: the recheck finds it, requests are 503 again,
	// and aggregated discovery marks the version stale.
	b.up.Store(false)
	waitAvailable(t, ctx, agg, wardleName, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck")
	// (The backend itself answers 503 "down" until crdserver's view of
	// the APIService has the condition.)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r := e.do(http.MethodGet, "/apis/"+wardleGV+"/namespaces/default/flunders", "")
		return r.code == http.StatusServiceUnavailable && string(r.body) == "service unavailable\n", nil
	}); err != nil {
		t.Fatal("still proxied after the backend went unavailable")
	}
	var stale []apidiscoveryv2.APIVersionDiscovery
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r := e.do(http.MethodGet, "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		var now apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(r.body, &now); err != nil {
			return false, err
		}
		for _, g := range now.Items {
			if g.Name == wardleGroup {
				stale = g.Versions
			}
		}
		return len(stale) == 1 && stale[0].Freshness == apidiscoveryv2.DiscoveryFreshnessStale && len(stale[0].Resources) == 0, nil
	}); err != nil {
		t.Fatalf("stale discovery: %+v", stale)
	}
}
