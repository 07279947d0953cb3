package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/utils/ptr"

	"github.com/crdserver/crdserver/internal/conversion"
)

func TestValidatingWebhookDenies(t *testing.T) {
	e := newEnv(t, Options{})
	h := newHookServer(t, func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{
			Allowed:          false,
			Result:           &metav1.Status{Message: "no widgets today", Code: 403},
			Warnings:         []string{"careful with " + r.Name},
			AuditAnnotations: map[string]string{"checked": "yes"},
		}
	})
	e.createValidatingWebhooks("deny", validatingWebhook("deny.example.com", h.clientConfig("/validate"), admissionregistrationv1.Fail))
	oi := NewObjectInterfaces(widgetFuncs)
	var (
		warnings []string
		err      error
		a        = attrs(widget("w", 1), nil, widgetsV1)
	)
	eventually(t, func() error {
		a = attrs(widget("w", 1), nil, widgetsV1)
		warnings, err = e.admit(a, oi)
		return errorIs(err, "denied the request")
	})
	if want := `admission webhook "deny.example.com" denied the request: no widgets today`; err.Error() != want || !apierrors.IsForbidden(err) {
		t.Errorf("error %v, want 403 %q", err, want)
	}
	if want := []string{"careful with w"}; !slices.Equal(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	if got := AuditAnnotations(a, auditinternal.LevelMetadata); got["deny.example.com/checked"] != "yes" {
		t.Errorf("audit annotations %v", got)
	}
	if v := h.reviewVersions(); v[0] != "admission.k8s.io/v1" {
		t.Errorf("review versions %v", v)
	}
	if obj := h.objects()[0]; obj.GetName() != "w" || obj.GetAPIVersion() != "example.com/v1" {
		t.Errorf("the webhook saw %v", obj.Object)
	}
	families, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"apiserver_admission_webhook_admission_duration_seconds",
		"apiserver_admission_webhook_rejection_count",
		"apiserver_admission_webhook_request_total",
		"apiserver_admission_controller_admission_duration_seconds",
		"apiserver_admission_step_admission_duration_seconds",
	} {
		if !slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == want }) {
			t.Errorf("no metric %s in the registry", want)
		}
	}
}

func TestValidatingWebhookV1beta1(t *testing.T) {
	e := newEnv(t, Options{})
	h := newHookServer(t, allow)
	hook := validatingWebhook("old.example.com", h.clientConfig("/"), admissionregistrationv1.Fail)
	hook.AdmissionReviewVersions = []string{"v1beta1"}
	e.createValidatingWebhooks("old", hook)
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		if _, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi); err != nil {
			return err
		}
		if h.calls.Load() == 0 {
			return errors.New("not called")
		}
		return nil
	})
	if v := h.reviewVersions(); v[0] != "admission.k8s.io/v1beta1" {
		t.Errorf("review versions %v", v)
	}
}

func TestMutatingWebhookPatches(t *testing.T) {
	e := newEnv(t, Options{})
	h := newHookServer(t, jsonPatch(`[{"op":"add","path":"/metadata/labels","value":{"hooked":"yes"}}]`))
	e.createMutatingWebhooks("mutate", mutatingWebhook("label.example.com", h.clientConfig("/mutate"), admissionregistrationv1.Fail))
	funcs := widgetFuncs
	funcs.Default = func(u *unstructured.Unstructured) {
		if _, ok, _ := unstructured.NestedString(u.Object, "spec", "color"); !ok {
			_ = unstructured.SetNestedField(u.Object, "blue", "spec", "color")
		}
	}
	oi := NewObjectInterfaces(funcs)
	var (
		w *unstructured.Unstructured
		a = attrs(widget("w", 1), nil, widgetsV1)
	)
	eventually(t, func() error {
		w = widget("w", 1)
		a = attrs(w, nil, widgetsV1)
		if _, err := e.admit(a, oi); err != nil {
			return err
		}
		if w.GetLabels()["hooked"] != "yes" {
			return fmt.Errorf("labels %v", w.GetLabels())
		}
		return nil
	})
	if c, _, _ := unstructured.NestedString(w.Object, "spec", "color"); c != "blue" {
		t.Errorf("not defaulted after the patch: %v", w.Object)
	}
	got := AuditAnnotations(a, auditinternal.LevelMetadata)
	if want := `{"configuration":"mutate","webhook":"label.example.com","mutated":true}`; got["mutation.webhook.admission.k8s.io/round_0_index_0"] != want {
		t.Errorf("audit annotations %v", got)
	}
	if _, ok := got["patch.webhook.admission.k8s.io/round_0_index_0"]; ok {
		t.Error("the patch is in a Metadata audit event")
	}
	got = AuditAnnotations(a, auditinternal.LevelRequest)
	if want := `{"configuration":"mutate","webhook":"label.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"hooked":"yes"}}],"patchType":"JSONPatch"}`; got["patch.webhook.admission.k8s.io/round_0_index_0"] != want {
		t.Errorf("audit annotations %v", got)
	}
}

func TestWebhookFailurePolicy(t *testing.T) {
	e := newEnv(t, Options{})
	dead := admissionregistrationv1.WebhookClientConfig{URL: ptr.To(deadURL(t))}
	live := newHookServer(t, allow)
	e.createValidatingWebhooks("ignore",
		validatingWebhook("live.example.com", live.clientConfig("/"), admissionregistrationv1.Fail),
		validatingWebhook("dead-ignore.example.com", dead, admissionregistrationv1.Ignore))
	e.createMutatingWebhooks("ignore", mutatingWebhook("dead-ignore.example.com", dead, admissionregistrationv1.Ignore))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		a := attrs(widget("w", 1), nil, widgetsV1)
		if _, err := e.admit(a, oi); err != nil {
			return err
		}
		if live.calls.Load() == 0 {
			return errors.New("the validating webhooks are not loaded")
		}
		if got := AuditAnnotations(a, auditinternal.LevelMetadata); got["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"] != "dead-ignore.example.com" {
			return fmt.Errorf("audit annotations %v", got)
		}
		return nil
	})

	e.createValidatingWebhooks("fail", validatingWebhook("dead-fail.example.com", dead, admissionregistrationv1.Fail))
	var err error
	eventually(t, func() error {
		_, err = e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		return errorIs(err, "dead-fail.example.com")
	})
	want := `Internal error occurred: failed calling webhook "dead-fail.example.com": failed to call webhook: Post "` + *dead.URL + `?timeout=10s": dial tcp`
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "connect: connection refused") || !apierrors.IsInternalError(err) {
		t.Errorf("error %v, want 500 %q...connection refused", err, want)
	}
}

func TestWebhookTimeout(t *testing.T) {
	e := newEnv(t, Options{})
	slow := newHookServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })
	hook := validatingWebhook("slow.example.com", slow.clientConfig("/"), admissionregistrationv1.Fail)
	hook.TimeoutSeconds = ptr.To[int32](1)
	e.createValidatingWebhooks("slow", hook)
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		if slow.calls.Load() == 0 {
			_, _ = e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
			return errors.New("not called")
		}
		return nil
	})
	start := time.Now()
	_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
	took := time.Since(start)
	if err := errorIs(err, `failed calling webhook "slow.example.com"`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("error %v, want a timeout", err)
	}
	if took > 4*time.Second {
		t.Errorf("a webhook with a timeout of 1s took %v", took)
	}

	hook.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "slow", ResourceVersion: "2"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{hook}}
	if _, err := e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		return err
	})
}

func TestWebhookService(t *testing.T) {
	h := newHookServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "from the service"}}
	})
	addr := strings.TrimPrefix(h.srv.URL, "https://")
	e := newEnv(t, Options{ServiceAddresses: map[string]string{conversion.ServiceKey("default", "webhook", 8443): addr}})
	cc := admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "webhook", Port: ptr.To[int32](8443), Path: ptr.To("/validate")},
		CABundle: h.caBundle,
	}
	e.createValidatingWebhooks("svc", validatingWebhook("svc.example.com", cc, admissionregistrationv1.Fail))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		return errorIs(err, `admission webhook "svc.example.com" denied the request: from the service`)
	})
}

func TestWebhookDryRun(t *testing.T) {
	e := newEnv(t, Options{})
	h := newHookServer(t, allow)
	unknown := validatingWebhook("unknown.example.com", h.clientConfig("/"), admissionregistrationv1.Fail)
	unknown.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
	e.createValidatingWebhooks("dry", unknown)
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrsDry(widget("w", 1), nil, widgetsV1, true), oi)
		return errorIs(err, `admission webhook "unknown.example.com" does not support dry run`)
	})
	if h.calls.Load() != 0 {
		t.Error("a webhook with side effects was called on a dry run")
	}
	if _, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi); err != nil || h.calls.Load() == 0 {
		t.Errorf("not a dry run: %v, %d calls", err, h.calls.Load())
	}
}

// Webhooks never see webhook configurations and admission policies, as
// Kubernetes protects them.
func TestWebhookNotCalledForAdmissionConfiguration(t *testing.T) {
	e := newEnv(t, Options{})
	h := newHookServer(t, allow)
	hook := validatingWebhook("all.example.com", h.clientConfig("/"), admissionregistrationv1.Fail)
	hook.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
	}}
	e.createValidatingWebhooks("all", hook)
	oi := NewObjectInterfaces(ResourceFuncs{})
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		if err == nil && h.calls.Load() == 0 {
			return errors.New("not called")
		}
		return err
	})
	before := h.calls.Load()
	for _, r := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": "x"},
		}}
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: r}
		if _, err := e.admit(attrs(obj, nil, gvr), oi); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	if h.calls.Load() != before {
		t.Errorf("the webhook was called for admission configuration")
	}
}

// The phases and plugins run in Kubernetes' order: mutating policies,
// mutating webhooks, the mutating policies again that asked for it
// (reinvocation), then validating policies and validating webhooks.
func TestOrder(t *testing.T) {
	e := newEnv(t, Options{})
	first := mutatingPolicy("first", admissionregistrationv1.Mutation{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"policy": "yes"}}}`},
	})
	e.createMutating(first)
	copier := mutatingPolicy("copy", admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `has(object.metadata.labels) && 'y' in object.metadata.labels ? ` +
			`[JSONPatch{op: "add", path: "/metadata/labels/x", value: object.metadata.labels["y"]}] : []`},
	})
	copier.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
	e.createMutating(copier)
	mutating := newHookServer(t, jsonPatch(`[{"op":"add","path":"/metadata/labels/y","value":"from-webhook"}]`))
	e.createMutatingWebhooks("y", mutatingWebhook("y.example.com", mutating.clientConfig("/"), admissionregistrationv1.Fail))
	p := validatingPolicy("thirteen", admissionregistrationv1.Validation{Expression: "object.spec.replicas != 13", Message: "unlucky"})
	e.createValidating(p, validatingBinding("thirteen", p.Name, admissionregistrationv1.Deny))
	validating := newHookServer(t, allow)
	e.createValidatingWebhooks("v", validatingWebhook("v.example.com", validating.clientConfig("/"), admissionregistrationv1.Fail))
	oi := NewObjectInterfaces(widgetFuncs)

	// The policies and webhooks load one by one (a policy source
	// recompiles at most every second): wait until every one acts. x is
	// set only when copy is reinvoked after the webhook set y.
	var w *unstructured.Unstructured
	want := map[string]string{"policy": "yes", "y": "from-webhook", "x": "from-webhook"}
	eventually(t, func() error {
		w = widget("w", 1)
		if _, err := e.admit(attrs(w, nil, widgetsV1), oi); err != nil {
			return err
		}
		if validating.calls.Load() == 0 || !maps.Equal(w.GetLabels(), want) {
			return fmt.Errorf("labels %v, want %v (copy reinvoked after the webhook), validating webhook called %d times", w.GetLabels(), want, validating.calls.Load())
		}
		return nil
	})
	if seen := mutating.objects(); seen[len(seen)-1].GetLabels()["policy"] != "yes" {
		t.Errorf("the mutating webhook ran before the mutating policy: %v", seen[len(seen)-1].GetLabels())
	}
	if seen := validating.objects(); !maps.Equal(seen[len(seen)-1].GetLabels(), w.GetLabels()) {
		t.Errorf("the validating webhook saw %v, not the mutated object", seen[len(seen)-1].GetLabels())
	}

	before := validating.calls.Load()
	_, err := e.admit(attrs(widget("w", 13), nil, widgetsV1), oi)
	if err := errorIs(err, "unlucky"); err != nil {
		t.Fatal(err)
	}
	if validating.calls.Load() != before {
		t.Error("the validating webhook ran although a validating policy denied the request")
	}
}
