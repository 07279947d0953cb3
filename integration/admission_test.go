package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	certutil "k8s.io/client-go/util/cert"
	kptr "k8s.io/utils/ptr"

	"github.com/crdserver/crdserver/server"
)

// Dynamic admission of writes: ValidatingAdmissionPolicies with bindings
// and params, MutatingAdmissionPolicies, and admission webhooks, on custom
// and built-in resources, through the engine.

const widgetsColl = "/apis/compat.example.com/v1/namespaces/default/widgets"

func widgetBody(name string, size int) string {
	return fmt.Sprintf(`{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":%d}}`, name, size)
}

// eventuallyWrite retries a write as a dry run until it answers code
// (policies and webhook configurations take effect within a second or
// so), then makes it for real.
func (e *env) eventuallyWrite(t *testing.T, method, path, body string, code int, contentType ...string) response {
	t.Helper()
	var r response
	eventually(t, e.ctx, fmt.Sprintf("%s %s answers %d", method, path, code), func() (bool, error) {
		headers := []string{}
		if len(contentType) > 0 {
			headers = []string{"Content-Type", contentType[0]}
		}
		r = e.do(method, path+"?dryRun=All", body, headers...)
		return r.code == code, nil
	})
	return e.do(method, path, body, contentType2(contentType)...)
}

func contentType2(ct []string) []string {
	if len(ct) == 0 {
		return nil
	}
	return []string{"Content-Type", ct[0]}
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	api := e.kube.AdmissionregistrationV1()
	// The largest size comes from a ConfigMap, the policy's param.
	if _, err := e.kube.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Data: map[string]string{"maxSize": "5"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := api.ValidatingAdmissionPolicies().Create(e.ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-size"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: widgetsOn(admissionregistrationv1.Create, admissionregistrationv1.Update),
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.size <= int(params.data.maxSize)",
				MessageExpression: "'size ' + string(object.spec.size) + ' is over ' + params.data.maxSize",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.ValidatingAdmissionPolicyBindings().Create(e.ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "max-size"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "max-size",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: kptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := e.eventuallyWrite(t, "POST", widgetsColl, widgetBody("big", 9), http.StatusUnprocessableEntity)
	st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if want := `widgets.compat.example.com "big" is forbidden: ValidatingAdmissionPolicy 'max-size' with binding 'max-size' denied request: size 9 is over 5`; st.Message != want {
		t.Errorf("denied: %q\nwant %q", st.Message, want)
	}
	if r := e.do("GET", widgetsColl+"/big", ""); r.code != http.StatusNotFound {
		t.Fatalf("a denied object was stored: %d", r.code)
	}
	if r := e.do("POST", widgetsColl, widgetBody("small", 3)); r.code != http.StatusCreated {
		t.Fatalf("allowed: %d %s", r.code, r.body)
	}
	// Warn instead of Deny: the write goes through with a warning.
	b, err := api.ValidatingAdmissionPolicyBindings().Get(e.ctx, "max-size", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
	if _, err := api.ValidatingAdmissionPolicyBindings().Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.eventuallyWrite(t, "POST", widgetsColl, widgetBody("warned", 8), http.StatusCreated)
	if r.code != http.StatusCreated || !strings.Contains(r.header.Get("Warning"), "Validation failed for ValidatingAdmissionPolicy 'max-size' with binding 'max-size': size 8 is over 5") {
		t.Fatalf("warned: %d %v %s", r.code, r.header.Values("Warning"), r.body)
	}
}

func TestMutatingAdmissionPolicy(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	api := e.kube.AdmissionregistrationV1()
	_, err := api.MutatingAdmissionPolicies().Create(e.ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"compat.example.com"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
				}}}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"admitted-by": "policy"}}}`,
				},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.MutatingAdmissionPolicyBindings().Create(e.ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "the label set", func() (bool, error) {
		r := e.do("POST", widgetsColl+"?dryRun=All", widgetBody("w", 1))
		return r.code == http.StatusCreated && strings.Contains(string(r.body), `"admitted-by":"policy"`), nil
	})
	if r := e.do("POST", widgetsColl, widgetBody("w", 1)); r.code != http.StatusCreated || !strings.Contains(string(r.body), `"admitted-by":"policy"`) {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := e.do("GET", widgetsColl+"/w", ""); !strings.Contains(string(r.body), `"admitted-by":"policy"`) {
		t.Fatalf("stored: %s", r.body)
	}
}

// admissionWebhook is an admission webhook on 127.0.0.1 over TLS: it refuses
// widgets of size over 5 and labels the others.
type admissionWebhook struct {
	url   string
	caPEM []byte
	calls atomic.Int64
}

func startAdmissionWebhook(t *testing.T) *admissionWebhook {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("admission-webhook", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	w := &admissionWebhook{caPEM: certPEM}
	mux := http.NewServeMux()
	review := func(rw http.ResponseWriter, r *http.Request, decide func(obj map[string]any, resp *admissionv1.AdmissionResponse)) {
		w.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
			http.Error(rw, "bad review", http.StatusBadRequest)
			return
		}
		var obj map[string]any
		_ = json.Unmarshal(ar.Request.Object.Raw, &obj)
		resp := &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
		decide(obj, resp)
		ar.Response = resp
		ar.Request = nil
		_ = json.NewEncoder(rw).Encode(ar)
	}
	mux.HandleFunc("/validate", func(rw http.ResponseWriter, r *http.Request) {
		review(rw, r, func(obj map[string]any, resp *admissionv1.AdmissionResponse) {
			spec, _ := obj["spec"].(map[string]any)
			if size, _ := spec["size"].(float64); size > 5 {
				resp.Allowed = false
				resp.Result = &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: fmt.Sprintf("size %v is too large", size)}
			}
			resp.Warnings = []string{"checked by the webhook"}
		})
	})
	mux.HandleFunc("/mutate", func(rw http.ResponseWriter, r *http.Request) {
		review(rw, r, func(_ map[string]any, resp *admissionv1.AdmissionResponse) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
			resp.Patch = []byte(`[{"op":"add","path":"/metadata/annotations","value":{"mutated":"yes"}}]`)
		})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	w.url = "https://" + ln.Addr().String()
	return w
}

func widgetRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"compat.example.com"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
	}}
}

func TestAdmissionWebhooks(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	w := startAdmissionWebhook(t)
	api := e.kube.AdmissionregistrationV1()
	none := admissionregistrationv1.SideEffectClassNone
	if _, err := api.MutatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutate.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: kptr.To(w.url + "/mutate"), CABundle: w.caPEM},
			Rules:                   widgetRules(),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validate"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: kptr.To(w.url + "/validate"), CABundle: w.caPEM},
			Rules:                   widgetRules(),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.eventuallyWrite(t, "POST", widgetsColl, widgetBody("big", 9), http.StatusForbidden)
	st := expectStatus(t, r, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	if want := `admission webhook "validate.example.com" denied the request: size 9 is too large`; st.Message != want {
		t.Errorf("denied: %q\nwant %q", st.Message, want)
	}
	r = e.do("POST", widgetsColl, widgetBody("ok", 2))
	if r.code != http.StatusCreated || !strings.Contains(string(r.body), `"mutated":"yes"`) || !strings.Contains(strings.Join(r.header.Values("Warning"), ","), "checked by the webhook") {
		t.Fatalf("allowed and mutated: %d %v %s", r.code, r.header.Values("Warning"), r.body)
	}

	// A webhook that is down: failurePolicy Fail refuses with Kubernetes'
	// message, Ignore lets the write through.
	dead := "https://127.0.0.1:9/validate"
	fail := admissionregistrationv1.Fail
	ignore := admissionregistrationv1.Ignore
	if _, err := api.ValidatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "dead"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "dead.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &dead, CABundle: w.caPEM},
			Rules:                   widgetRules(),
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          kptr.To[int32](2),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.eventuallyWrite(t, "POST", widgetsColl, widgetBody("down", 1), http.StatusInternalServerError)
	st = expectStatus(t, r, http.StatusInternalServerError, metav1.StatusReasonInternalError, "")
	if !strings.HasPrefix(st.Message, `Internal error occurred: failed calling webhook "dead.example.com": failed to call webhook: Post "https://127.0.0.1:9/validate?timeout=2s": dial tcp 127.0.0.1:9: connect: connection refused`) {
		t.Errorf("dead, Fail: %s", st.Message)
	}
	cfg, err := api.ValidatingWebhookConfigurations().Get(e.ctx, "dead", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks[0].FailurePolicy = &ignore
	if _, err := api.ValidatingWebhookConfigurations().Update(e.ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventuallyWrite(t, "POST", widgetsColl, widgetBody("down", 1), http.StatusCreated)
}

// A ValidatingAdmissionPolicy on DELETE sees the object being deleted
// (oldObject): a protected widget stays, one by one or in a collection;
// the policy's audit annotations reach the request's audit event.
// widgetsOn matches the widgets of compat.example.com on ops.
func widgetsOn(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"compat.example.com"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
		}}}}
}

// bindPolicy creates the ValidatingAdmissionPolicy name with spec, bound
// by a ValidatingAdmissionPolicyBinding of the same name with actions.
func (e *env) bindPolicy(t *testing.T, name string, spec admissionregistrationv1.ValidatingAdmissionPolicySpec, actions ...admissionregistrationv1.ValidationAction) {
	t.Helper()
	api := e.kube.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(e.ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(e.ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: actions},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestAdmissionOnDelete(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	e := start(t, func(c *server.Config) { c.AuditLogPath, c.AuditPolicyFile = logPath, policy })
	e.createCRD(widgetCRD(t))
	e.mustCreate(widgetsColl, `{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":"keep","labels":{"protected":"true"}},"spec":{"size":1}}`)
	e.mustCreate(widgetsColl, widgetBody("free", 1))
	e.bindPolicy(t, "protect", admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: widgetsOn(admissionregistrationv1.Delete),
		Validations: []admissionregistrationv1.Validation{{
			Expression: "oldObject.metadata.?labels.?protected.orValue('') != 'true'",
			Message:    "protected widgets stay",
		}},
		AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "deleted", ValueExpression: "'by ' + request.userInfo.username"}},
	}, admissionregistrationv1.Deny)
	r := e.eventuallyWrite(t, "DELETE", widgetsColl+"/keep", "", http.StatusUnprocessableEntity)
	st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if want := `widgets.compat.example.com "keep" is forbidden: ValidatingAdmissionPolicy 'protect' with binding 'protect' denied request: protected widgets stay`; st.Message != want {
		t.Errorf("denied: %q\nwant %q", st.Message, want)
	}
	if r := e.do("DELETE", widgetsColl+"/free", ""); r.code != http.StatusOK {
		t.Fatalf("delete free: %d %s", r.code, r.body)
	}
	// A collection: the protected widget refuses, and stays.
	e.mustCreate(widgetsColl, widgetBody("free2", 1))
	if r := e.do("DELETE", widgetsColl, ""); r.code != http.StatusUnprocessableEntity {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	if r := e.do("GET", widgetsColl+"/keep", ""); r.code != http.StatusOK {
		t.Fatalf("the protected widget was deleted: %d", r.code)
	}

	var ann map[string]string
	for _, ev := range eventsFor(readEvents(t, logPath), "delete", widgetsColl+"/free") {
		if ev.Stage == auditv1.StageResponseComplete && ev.ObjectRef.Name == "free" {
			ann = ev.Annotations
		}
	}
	if got := ann["protect/deleted"]; got != "by crdserver-admin" {
		t.Errorf("audit annotations of the delete: %v", ann)
	}
}
