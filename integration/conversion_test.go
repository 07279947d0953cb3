package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
	"github.com/crdserver/crdserver/server"
)

var nameField = regexp.MustCompile(`"name":"[^"]*"`)

var (
	exV1     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "crontabs"}
	exV1beta = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "crontabs"}
)

// webhookServer serves a conversion handler over TLS on a loopback port and
// counts the reviews and objects it gets.
type webhookServer struct {
	url     string
	caPEM   []byte
	calls   atomic.Int64
	objects atomic.Int64
	mu      sync.Mutex
	handler http.Handler
}

func (w *webhookServer) set(h http.Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handler = h
}

func startWebhook(t *testing.T, h http.Handler, dnsNames ...string) *webhookServer {
	t.Helper()
	cert, caPEM, err := selfSigned("webhook", dnsNames...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ws := &webhookServer{url: "https://" + ln.Addr().String(), caPEM: caPEM, handler: h}
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var review apiextensionsv1.ConversionReview
			if json.Unmarshal(body, &review) == nil && review.Request != nil {
				ws.calls.Add(1)
				ws.objects.Add(int64(len(review.Request.Objects)))
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			ws.mu.Lock()
			h := ws.handler
			ws.mu.Unlock()
			h.ServeHTTP(w, r)
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ws
}

// conversionCRD is the CronTab of Kubernetes' webhook conversion example: v1beta1 with hostPort, v1 with host
// and port, converted by a webhook.
func conversionCRD(storage string, cc apiextensionsv1.WebhookClientConfig, reviewVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	if len(reviewVersions) == 0 {
		reviewVersions = []string{"v1", "v1beta1"}
	}
	schemaFor := func(props ...string) *apiextensionsv1.CustomResourceValidation {
		s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: ptr(true)},
		}}
		for _, p := range props {
			s.Properties[p] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Storage: storage == "v1beta1", Schema: schemaFor("hostPort")},
				{Name: "v1", Served: true, Storage: storage == "v1", Schema: schemaFor("host", "port")},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: &cc, ConversionReviewVersions: reviewVersions},
			},
		},
	}
}

func betaCronTab(name, hostPort string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1beta1", "kind": "CronTab",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "cron"}},
		"hostPort": hostPort,
	}}
}

// keepAnswers keeps a webhook's answers for an hour, for tests that count
// its calls across steps a slow machine may take longer than the default
// recheck interval for.
func keepAnswers(c *server.Config) { c.Conversion.RecheckInterval = time.Hour }

func TestWebhookConversion(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme())
	e := start(t, func(c *server.Config) { c.Conversion.MaxObjectsPerCall = 2 }, keepAnswers)
	e.createCRD(conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM}))
	beta := e.dyn.Resource(exV1beta).Namespace("default")
	v1 := e.dyn.Resource(exV1).Namespace("default")
	for i := 0; i < 5; i++ {
		if _, err := beta.Create(e.ctx, betaCronTab(fmt.Sprintf("c%d", i), fmt.Sprintf("host%d:%d", i, 1000+i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := ws.calls.Load(); n != 0 {
		t.Fatalf("writes in the storage version called the webhook %d times", n)
	}
	// Read in v1: converted, labels kept, stored object unchanged.
	got, err := v1.Get(e.ctx, "c1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAPIVersion() != "example.com/v1" || got.Object["host"] != "host1" || got.Object["port"] != "1001" || got.Object["hostPort"] != nil || got.GetLabels()["app"] != "cron" {
		t.Fatalf("converted: %v", got.Object)
	}
	if b, _ := beta.Get(e.ctx, "c1", metav1.GetOptions{}); b.Object["hostPort"] != "host1:1001" {
		t.Fatalf("stored object changed: %v", b.Object)
	}
	// A list converts in batches of at most 2 objects: 2 calls for the 4
	// the GET of c1 (which shares its conversion) left.
	before := ws.calls.Load()
	l, err := v1.List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 5 || l.Items[4].Object["port"] != "1004" {
		t.Fatalf("list: %v %d", err, len(l.Items))
	}
	if n := ws.calls.Load() - before; n != 2 {
		t.Fatalf("list of 5 took %d calls", n)
	}
	// The conversions are shared: the same list again calls nothing.
	before = ws.calls.Load()
	if _, err := v1.List(e.ctx, metav1.ListOptions{}); err != nil || ws.calls.Load() != before {
		t.Fatalf("second list: %v, %d calls", err, ws.calls.Load()-before)
	}

	// Switch the storage version to v1: nothing is rewritten, new writes
	// go to v1.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.example.com", metav1.GetOptions{})
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStorage(t, e, "v1")

	// Watch in v1 while writing in v1beta1: events come converted.
	w, err := v1.Watch(e.ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := beta.Create(e.ctx, betaCronTab("new", "h:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if u := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Added || u.GetAPIVersion() != "example.com/v1" || u.Object["host"] != "h" {
		t.Fatalf("watch event: %s %v", ev.Type, u.Object)
	}
	// "new" was written (converted from v1beta1) in v1: reading it in v1
	// calls no webhook. An old object moves to v1 once updated.
	before = ws.calls.Load()
	if _, err := v1.Get(e.ctx, "new", metav1.GetOptions{}); err != nil || ws.calls.Load() != before {
		t.Fatalf("object written after the switch is not stored in v1 (calls %d)", ws.calls.Load()-before)
	}
	old, _ := beta.Get(e.ctx, "c0", metav1.GetOptions{})
	old.SetAnnotations(map[string]string{"touched": "yes"})
	if _, err := beta.Update(e.ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before = ws.calls.Load()
	if got, err := v1.Get(e.ctx, "c0", metav1.GetOptions{}); err != nil || got.Object["host"] != "host0" || ws.calls.Load() != before {
		t.Fatalf("updated object not moved to v1: %v, calls %d", err, ws.calls.Load()-before)
	}
	// Patch and status of a resource in the non-storage version work
	// through conversion both ways.
	p, err := beta.Patch(e.ctx, "c2", "application/merge-patch+json", []byte(`{"hostPort":"patched:9"}`), metav1.PatchOptions{})
	if err != nil || p.Object["hostPort"] != "patched:9" {
		t.Fatalf("patch in v1beta1: %v %v", err, p)
	}
	if got, _ := v1.Get(e.ctx, "c2", metav1.GetOptions{}); got.Object["host"] != "patched" || got.Object["port"] != "9" {
		t.Fatalf("patched object in v1: %v", got.Object)
	}
}

// waitStorage waits until the server writes in storage version v.
func waitStorage(t *testing.T, e *env, v string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, sv := range crd.Status.StoredVersions {
			if sv == v {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("storage version %s not in storedVersions", v)
	}
	// The registry serves the new definition once it has caught up.
	_ = e.do("GET", "/apis/example.com", "")
}

func TestWebhookConversionThroughService(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme(), "convert.webhooks.svc")
	addr := strings.TrimPrefix(ws.url, "https://")
	e := start(t, func(c *server.Config) {
		c.Conversion.ServiceAddresses = map[string]string{"webhooks/convert:8443": addr}
	})
	cc := apiextensionsv1.WebhookClientConfig{
		Service:  &apiextensionsv1.ServiceReference{Namespace: "webhooks", Name: "convert", Port: ptr(int32(8443)), Path: ptr("/convert")},
		CABundle: ws.caPEM,
	}
	e.createCRD(conversionCRD("v1beta1", cc, "v1beta1"))
	if _, err := e.dyn.Resource(exV1beta).Namespace("default").Create(e.ctx, betaCronTab("s", "a:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.dyn.Resource(exV1).Namespace("default").Get(e.ctx, "s", metav1.GetOptions{})
	if err != nil || got.Object["host"] != "a" {
		t.Fatalf("through the service: %v %v", err, got)
	}
}

// reviewFunc answers a ConversionReview with the toolkit's answer, then
// lets a test spoil it.
func spoiled(spoil func(req *apiextensionsv1.ConversionReview, resp *apiextensionsv1.ConversionReview) []byte) http.Handler {
	good := crontab.NewScheme()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req apiextensionsv1.ConversionReview
		_ = json.Unmarshal(body, &req)
		rec := &recorder{header: http.Header{}}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		good.ServeHTTP(rec, r)
		var resp apiextensionsv1.ConversionReview
		_ = json.Unmarshal([]byte(rec.body.String()), &resp)
		_, _ = w.Write(spoil(&req, &resp))
	})
}

func TestWebhookFailures(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme())
	e := start(t, func(c *server.Config) { c.Conversion.Timeout = 300 * time.Millisecond })
	e.createCRD(conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM}))
	if _, err := e.dyn.Resource(exV1beta).Namespace("default").Create(e.ctx, betaCronTab("f", "a:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	marshal := func(v any) []byte { b, _ := json.Marshal(v); return b }
	cases := []struct {
		name    string
		handler http.Handler
		msg     string
	}{
		{"non-200", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "webhook broke", http.StatusServiceUnavailable)
		}), "failed: the server is currently unable to handle the request"},
		{"malformed JSON", spoiled(func(_, _ *apiextensionsv1.ConversionReview) []byte { return []byte("{not json") }), "malformed response"},
		{"timeout", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) }), "Client.Timeout exceeded"},
		{"wrong uid", spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
			resp.Response.UID = "nope"
			return marshal(resp)
		}), `expected response.uid=`},
		{"wrong count", spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
			resp.Response.ConvertedObjects = append(resp.Response.ConvertedObjects, resp.Response.ConvertedObjects...)
			return marshal(resp)
		}), "returned 2 objects, expected 1"},
		{"failed result", spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
			resp.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: "cannot convert this one"}
			return marshal(resp)
		}), "cannot convert this one"},
		{"wrong apiVersion", spoiled(func(req, resp *apiextensionsv1.ConversionReview) []byte {
			raw := strings.Replace(string(resp.Response.ConvertedObjects[0].Raw), `"`+req.Request.DesiredAPIVersion+`"`, `"example.com/v2"`, 1)
			resp.Response.ConvertedObjects[0].Raw = []byte(raw)
			return marshal(resp)
		}), "received example.com/v2)"},
		{"changed name", spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
			raw := nameField.ReplaceAllString(string(resp.Response.ConvertedObjects[0].Raw), `"name":"renamed"`)
			resp.Response.ConvertedObjects[0].Raw = []byte(raw)
			return marshal(resp)
		}), "must have the same name: f != renamed"},
		{"wrong review version", spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
			resp.APIVersion = "apiextensions.k8s.io/v1beta1"
			return marshal(resp)
		}), "expected webhook response of apiextensions.k8s.io/v1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws.set(c.handler)
			r := e.do("GET", "/apis/example.com/v1/namespaces/default/crontabs/f", "")
			st := expectStatus(t, r, http.StatusInternalServerError, metav1.StatusReasonInternalError, "conversion webhook for example.com/v1beta1, Kind=CronTab")
			if !strings.Contains(st.Message, c.msg) {
				t.Fatalf("message %q lacks %q", st.Message, c.msg)
			}
			// A write in the other version fails and stores nothing.
			r = e.do("POST", "/apis/example.com/v1/namespaces/default/crontabs", `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"w-`+strings.ToLower(strings.ReplaceAll(c.name, " ", "-"))+`"},"host":"a","port":"1"}`)
			if r.code != http.StatusInternalServerError {
				t.Fatalf("write through a failing webhook: %d %s", r.code, r.body)
			}
		})
	}
	// Nothing was written by the failed creates.
	ws.set(crontab.NewScheme())
	l, err := e.dyn.Resource(exV1beta).Namespace("default").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("after failures: %v %d objects", err, len(l.Items))
	}
	// Labels and annotations the webhook changes are kept; other metadata
	// changes are ignored.
	ws.set(spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
		raw := strings.Replace(string(resp.Response.ConvertedObjects[0].Raw), `"labels":{"app":"cron"}`, `"labels":{"app":"converted"},"generation":42`, 1)
		resp.Response.ConvertedObjects[0].Raw = []byte(raw)
		return marshal(resp)
	}))
	got, err := e.dyn.Resource(exV1).Namespace("default").Get(e.ctx, "f", metav1.GetOptions{})
	if err != nil || got.GetLabels()["app"] != "converted" || got.GetGeneration() != 1 {
		t.Fatalf("metadata rules: %v labels %v generation %d", err, got.GetLabels(), got.GetGeneration())
	}
	// Webhook down.
	e2 := start(t)
	e2.createCRD(conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr("https://127.0.0.1:1/convert")}))
	if _, err := e2.dyn.Resource(exV1beta).Namespace("default").Create(e2.ctx, betaCronTab("d", "a:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.dyn.Resource(exV1).Namespace("default").Get(e2.ctx, "d", metav1.GetOptions{}); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("webhook down: %v", err)
	}
}

func TestConversionReviewVersionsRequired(t *testing.T) {
	e := start(t)
	crd := conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr("https://127.0.0.1:1/convert")}, "v2")
	_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "conversionReviewVersions") {
		t.Fatalf("unsupported review versions: %v", err)
	}
	crd = conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr("http://127.0.0.1:1/convert")})
	_, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "https") {
		t.Fatalf("http webhook URL: %v", err)
	}
}

func TestStorageVersionMigration(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme())
	e := start(t, keepAnswers)
	e.createCRD(conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM}))
	beta := e.dyn.Resource(exV1beta).Namespace("default")
	for i := 0; i < 7; i++ {
		if _, err := beta.Create(e.ctx, betaCronTab(fmt.Sprintf("m%d", i), fmt.Sprintf("h%d:%d", i, i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.example.com", metav1.GetOptions{})
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStorage(t, e, "v1")
	// Objects written after the switch, through either version, are
	// stored in v1 already: the migration leaves them alone.
	if _, err := beta.Create(e.ctx, betaCronTab("new-beta", "h:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.Patch(e.ctx, "m0", types.MergePatchType, []byte(`{"hostPort":"h0:10"}`), metav1.PatchOptions{FieldManager: "patcher"}); err != nil {
		t.Fatal(err)
	}
	before, _ := e.dyn.Resource(exV1).Namespace("default").Get(e.ctx, "m0", metav1.GetOptions{})
	svms := e.dyn.Resource(schema.GroupVersionResource{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"})
	svm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
		"metadata": map[string]any{"name": "crontabs"},
		"spec":     map[string]any{"resource": map[string]any{"group": "example.com", "resource": "crontabs"}},
	}}
	if _, err := svms.Create(e.ctx, svm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var conds []any
	err = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := svms.Get(ctx, "crontabs", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ = unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			c := c.(map[string]any)
			if (c["type"] == "Succeeded" || c["type"] == "Failed") && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("migration did not end: %v", conds)
	}
	if !strings.Contains(fmt.Sprint(conds), "Succeeded") || !strings.Contains(fmt.Sprint(conds), "migrated 6 objects") {
		after, _ := e.dyn.Resource(exV1).Namespace("default").Get(e.ctx, "m0", metav1.GetOptions{})
		t.Fatalf("conditions %v (6 of 8 objects were stored in v1beta1)\nm0 before: %v\nm0 after:  %v", conds, before, after)
	}
	crd, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.example.com", metav1.GetOptions{})
	if fmt.Sprint(crd.Status.StoredVersions) != "[v1]" {
		t.Fatalf("storedVersions %v", crd.Status.StoredVersions)
	}
	// Everything is stored in v1 now: a list in v1 calls no webhook.
	calls := ws.calls.Load()
	l, err := e.dyn.Resource(exV1).Namespace("default").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 8 || ws.calls.Load() != calls || l.Items[3].Object["host"] != "h3" {
		t.Fatalf("after migration: %v %d items, %d calls", err, len(l.Items), ws.calls.Load()-calls)
	}
	// v1beta1 can now go.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.example.com", metav1.GetOptions{})
		crd.Spec.Versions = crd.Spec.Versions[1:]
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("removing the migrated version: %v", err)
	}
}

// selfSigned makes a serving certificate for 127.0.0.1, ::1 and dnsNames
// with client-go's certificate helper, and returns it with the PEM that
// trusts it (a caBundle).
func selfSigned(name string, dnsNames ...string) (tls.Certificate, []byte, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, dnsNames)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// The webhook's answers survive a CRD edit that leaves spec.conversion
// alone, and a flip to None and back: the cached objects remember what the
// webhook answered for what it was sent, so the first list after the edit
// sends it only the object written since (issue 15).
func TestWebhookAnswersSurviveCRDEdits(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme())
	e := start(t, keepAnswers)
	cc := apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM}
	e.createCRD(conversionCRD("v1beta1", cc))
	beta := e.dyn.Resource(exV1beta).Namespace("default")
	v1 := e.dyn.Resource(exV1).Namespace("default")
	for i := 0; i < 6; i++ {
		if _, err := beta.Create(e.ctx, betaCronTab(fmt.Sprintf("c%d", i), fmt.Sprintf("host%d:%d", i, 1000+i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	listV1 := func(want int) []unstructured.Unstructured {
		t.Helper()
		l, err := v1.List(e.ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != want {
			t.Fatalf("list in v1: %v, %d items", err, len(l.Items))
		}
		return l.Items
	}
	listV1(6)
	if n := ws.objects.Load(); n != 6 {
		t.Fatalf("the first list sent %d objects to the webhook, want 6", n)
	}
	editCRD := func(edit func(*apiextensionsv1.CustomResourceDefinition)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.example.com", metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(crd)
			_, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// A new field in the schema of v1beta1 (the storage version): a new
	// generation, new schemas, and the stored objects are read again with
	// them, which changes none of them.
	editCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["note"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	})
	// Served once an object keeps its note (the old schema prunes it).
	probe := betaCronTab("probe", "p:1")
	probe.Object["note"] = "kept"
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := beta.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Object["note"] == "kept", nil
	})
	if err != nil {
		t.Fatal("the edited schema is not served")
	}
	before := ws.objects.Load()
	for i, it := range listV1(6) {
		if it.Object["host"] != fmt.Sprintf("host%d", i) || it.Object["port"] != fmt.Sprint(1000+i) {
			t.Errorf("after the edit: %v", it.Object)
		}
	}
	if n := ws.objects.Load() - before; n != 0 {
		t.Errorf("the first list after a schema edit sent %d objects to the webhook, want 0", n)
	}

	// None, then the same webhook again.
	editCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	})
	servedHost := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := v1.Get(ctx, "c0", metav1.GetOptions{})
			return err == nil && (got.Object["host"] != nil) == want, nil
		})
		if err != nil {
			t.Fatalf("v1 objects with host %v are not served", want)
		}
	}
	servedHost(false)
	before = ws.objects.Load()
	editCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion = conversionCRD("v1beta1", cc).Spec.Conversion
	})
	servedHost(true)
	listV1(6)
	if n := ws.objects.Load() - before; n != 0 {
		t.Errorf("going back to the same webhook sent it %d objects, want 0", n)
	}

	// An object that changed is sent again.
	c3, err := beta.Get(e.ctx, "c3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c3.Object["hostPort"] = "moved:7"
	if _, err := beta.Update(e.ctx, c3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before = ws.objects.Load()
	if got, err := v1.Get(e.ctx, "c3", metav1.GetOptions{}); err != nil || got.Object["host"] != "moved" || got.Object["port"] != "7" {
		t.Fatalf("changed object: %v %v", err, got)
	}
	if n := ws.objects.Load() - before; n != 1 {
		t.Errorf("the changed object was sent %d times, want 1", n)
	}
}
