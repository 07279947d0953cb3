package admission

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/openapi"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	// Kubernetes recompiles the policies every second; tests need not wait
	// that long.
	restore := generic.SetPolicyRefreshIntervalForTests(10 * time.Millisecond)
	code := m.Run()
	restore()
	os.Exit(code)
}

// The test resources: widgets.example.com in v1 (spec.replicas) and v2
// (spec.size, the same number), and ConfigMaps.
var (
	widgetsV1    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgetsV2    = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	widgetV1     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	widgetV2     = schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Widget"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	version := func(name, field string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						field:   {Type: "integer"},
						"color": {Type: "string"},
					}},
				},
			}},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				version("v1", "replicas", true), version("v2", "size", false),
			},
		},
	}
}

// widgetFuncs are the ResourceFuncs of widgets: v1 spec.replicas is v2
// spec.size.
var widgetFuncs = ResourceFuncs{
	Convert: func(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
		out := obj.DeepCopy()
		out.SetAPIVersion(to.String())
		from, into := "replicas", "size"
		if to.Version == "v1" {
			from, into = "size", "replicas"
		}
		if v, ok, _ := unstructured.NestedFieldCopy(out.Object, "spec", from); ok {
			unstructured.RemoveNestedField(out.Object, "spec", from)
			if err := unstructured.SetNestedField(out.Object, v, "spec", into); err != nil {
				return nil, err
			}
		}
		return out, nil
	},
	EquivalentResources: func(schema.GroupVersionResource, string) []schema.GroupVersionResource {
		return []schema.GroupVersionResource{widgetsV1, widgetsV2}
	},
	KindFor: func(r schema.GroupVersionResource, _ string) schema.GroupVersionKind {
		return widgetV1.GroupKind().WithVersion(r.Version)
	},
}

// env is an Admission started over fake clients.
type env struct {
	t        *testing.T
	client   *fake.Clientset
	adm      *Admission
	registry *prometheus.Registry
	ctx      context.Context // ends with the test
}

// allowAll is an authorizer that allows everything.
var allowAll = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
})

func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default"}}})
	schemas := map[string]openapi.GroupVersion{}
	for _, v := range []string{"v1", "v2"} {
		doc, err := builder.BuildOpenAPIV3(widgetCRD(), v, builder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		schemas["apis/example.com/"+v] = staticSchema(b)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgetV1, meta.RESTScopeNamespace)
	mapper.Add(widgetV2, meta.RESTScopeNamespace)
	mapper.Add(configMapGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, client: client, registry: prometheus.NewRegistry(), ctx: ctx}
	o.Client = client
	o.OpenAPI = staticPaths(schemas) // the fake's own discovery panics
	o.Dynamic = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	o.RESTMapper = mapper
	o.Authorizer = allowAll
	o.Registerer = e.registry
	adm, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.adm = adm
	// Start's context is the life of admission: the test's.
	started := make(chan error, 1)
	go func() { started <- adm.Start(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("admission has not started in 30s")
	}
	return e
}

// staticPaths are OpenAPI v3 documents by path.
type staticPaths map[string]openapi.GroupVersion

func (p staticPaths) Paths() (map[string]openapi.GroupVersion, error) { return p, nil }

type staticSchema []byte

func (s staticSchema) Schema(string) ([]byte, error) { return s, nil }
func (s staticSchema) ServerRelativeURL() string     { return "/openapi/v3/static" }

// widget is a v1 Widget in namespace default.
func widget(name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"replicas": replicas},
	}}
}

// attrs are the attributes of a create (old == nil) or update of obj by
// alice, as the engine makes them.
func attrs(obj, old *unstructured.Unstructured, resource schema.GroupVersionResource) admission.Attributes {
	return attrsDry(obj, old, resource, false)
}

func attrsDry(obj, old *unstructured.Unstructured, resource schema.GroupVersionResource, dry bool) admission.Attributes {
	op := admission.Create
	var opts runtime.Object = &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}}
	var oldObj runtime.Object
	if old != nil {
		op = admission.Update
		opts = &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}}
		oldObj = old
	}
	return admission.NewAttributesRecord(obj, oldObj, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(),
		resource, "", op, opts, dry, &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}})
}

// recorder collects warnings.
type recorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *recorder) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, text)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warnings...)
}

// admit runs both phases on a, as the engine does (Validate only when
// Admit admits), with a warning recorder, and returns the warnings.
func (e *env) admit(a admission.Attributes, o admission.ObjectInterfaces) ([]string, error) {
	rec := &recorder{}
	ctx, cancel := context.WithTimeout(warning.WithWarningRecorder(e.ctx, rec), 30*time.Second)
	defer cancel()
	if err := e.adm.Admit(ctx, a, o); err != nil {
		return rec.list(), err
	}
	err := e.adm.Validate(ctx, a, o)
	return rec.list(), err
}

// eventually retries f until it returns nil, for at most 15 seconds:
// configuration reaches the plugins through informers.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errorIs says whether err's message contains want.
func errorIs(err error, want string) error {
	switch {
	case err == nil:
		return errors.New("admitted, want " + want)
	case !strings.Contains(err.Error(), want):
		return errors.New("error " + err.Error() + ", want " + want)
	}
	return nil
}

// Configurations as the API server stores them: defaulted.

func widgetRules(versions ...string) []admissionregistrationv1.NamedRuleWithOperations {
	return []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: versions,
			Resources: []string{"widgets"}, Scope: ptr.To(admissionregistrationv1.AllScopes)},
	}}}
}

func matchResources(rules []admissionregistrationv1.NamedRuleWithOperations) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
		ResourceRules:     rules,
		MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
	}
}

func validatingPolicy(name string, validations ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: matchResources(widgetRules("*")),
			Validations:      validations,
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
		},
	}
}

func validatingBinding(name, policy string, actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: actions},
	}
}

func (e *env) createValidating(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	e.t.Helper()
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func mutatingPolicy(name string, mutations ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints:   matchResources(widgetRules("*")),
			Mutations:          mutations,
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
}

func (e *env) createMutating(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	e.t.Helper()
	if _, err := e.client.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name + "-binding"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name},
	}
	if _, err := e.client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// Webhooks.

// hookServer is an HTTPS admission webhook on 127.0.0.1 whose certificate
// is also valid for webhook.default.svc.
type hookServer struct {
	srv      *httptest.Server
	caBundle []byte
	calls    atomic.Int32
	mu       sync.Mutex
	seen     []*unstructured.Unstructured // the objects of the reviews, in order
	versions []string                     // the apiVersions of the reviews
	stop     chan struct{}                // closed when the test ends
}

var (
	certOnce          sync.Once
	certPEM, keyPEM   []byte
	errCertGeneration error
)

// newHookServer serves answer; a nil answer is none at all (the request
// waits until the caller gives up, 5 seconds at most).
func newHookServer(t *testing.T, answer func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *hookServer {
	t.Helper()
	certOnce.Do(func() {
		certPEM, keyPEM, errCertGeneration = certutil.GenerateSelfSignedCertKey("127.0.0.1",
			[]net.IP{net.ParseIP("127.0.0.1")}, []string{"webhook.default.svc"})
	})
	if errCertGeneration != nil {
		t.Fatal(errCertGeneration)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookServer{caBundle: certPEM, stop: make(chan struct{})}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// v1 and v1beta1 reviews have the same shape.
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.versions = append(h.versions, review.APIVersion)
		if len(review.Request.Object.Raw) > 0 {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(review.Request.Object.Raw); err == nil {
				h.seen = append(h.seen, u)
			}
		}
		h.mu.Unlock()
		resp := answer(review.Request)
		if resp == nil {
			// No answer: hold the request until the test ends (at most
			// 5 s), whatever the client does; returning when its request
			// ends could answer a later request early (an empty 200).
			select {
			case <-h.stop:
			case <-time.After(5 * time.Second):
			}
			return
		}
		resp.UID = review.Request.UID
		out := &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	h.srv.Listener = listenLoopback(t)
	h.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	h.srv.StartTLS()
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { close(h.stop) }) // runs first: held requests end
	return h
}

func (h *hookServer) objects() []*unstructured.Unstructured {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*unstructured.Unstructured(nil), h.seen...)
}

func (h *hookServer) reviewVersions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.versions...)
}

func (h *hookServer) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(h.srv.URL + path), CABundle: h.caBundle}
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// deadURL is an https URL on 127.0.0.1 where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	l := listenLoopback(t)
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "https://" + addr + "/"
}

func widgetWebhookRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"*"},
			Resources: []string{"widgets"}, Scope: ptr.To(admissionregistrationv1.AllScopes)},
	}}
}

func validatingWebhook(name string, cc admissionregistrationv1.WebhookClientConfig, fail admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            cc,
		Rules:                   widgetWebhookRules(),
		FailurePolicy:           ptr.To(fail),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector:       &metav1.LabelSelector{},
		ObjectSelector:          &metav1.LabelSelector{},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1", "v1beta1"},
	}
}

func mutatingWebhook(name string, cc admissionregistrationv1.WebhookClientConfig, fail admissionregistrationv1.FailurePolicyType) admissionregistrationv1.MutatingWebhook {
	v := validatingWebhook(name, cc, fail)
	return admissionregistrationv1.MutatingWebhook{
		Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, FailurePolicy: v.FailurePolicy,
		MatchPolicy: v.MatchPolicy, NamespaceSelector: v.NamespaceSelector, ObjectSelector: v.ObjectSelector,
		SideEffects: v.SideEffects, TimeoutSeconds: v.TimeoutSeconds, AdmissionReviewVersions: v.AdmissionReviewVersions,
		ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
	}
}

func (e *env) createValidatingWebhooks(name string, hooks ...admissionregistrationv1.ValidatingWebhook) {
	e.t.Helper()
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
	if _, err := e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createMutatingWebhooks(name string, hooks ...admissionregistrationv1.MutatingWebhook) {
	e.t.Helper()
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
	if _, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// allow answers every review with allowed.
func allow(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// jsonPatch answers with a JSONPatch.
func jsonPatch(patch string) func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
	}
}
