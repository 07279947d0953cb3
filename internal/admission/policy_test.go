package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestValidatingPolicyDeniesCustomResource(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("max-replicas",
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", Message: "at most 5 replicas"},
		admissionregistrationv1.Validation{
			Expression:        "!has(object.spec.color) || object.spec.color != 'red'",
			MessageExpression: "'no ' + object.spec.color + ' widgets, ' + request.userInfo.username",
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}}
	p.Spec.Validations[0].Expression = "variables.replicas <= 5"
	e.createValidating(p, validatingBinding("max-replicas-binding", p.Name, admissionregistrationv1.Deny))
	oi := NewObjectInterfaces(widgetFuncs)

	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w1", 10), nil, widgetsV1), oi)
		return errorIs(err, "denied request")
	})
	_, err := e.admit(attrs(widget("w1", 10), nil, widgetsV1), oi)
	want := `widgets.example.com "w1" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: at most 5 replicas`
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("error %#v, want 422 Invalid (the default reason)", err)
	}

	red := widget("w2", 1)
	red.Object["spec"].(map[string]any)["color"] = "red"
	_, err = e.admit(attrs(red, nil, widgetsV1), oi)
	want = `widgets.example.com "w2" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: no red widgets, alice`
	if err == nil || err.Error() != want || !apierrors.IsForbidden(err) {
		t.Fatalf("error %v, want 403 %q", err, want)
	}

	if _, err := e.admit(attrs(widget("w3", 5), nil, widgetsV1), oi); err != nil {
		t.Fatalf("a compliant widget: %v", err)
	}
}

func TestValidatingPolicyMatchConditionsAndExclusions(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("max-replicas", admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5"})
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-alice", Expression: "request.userInfo.username != 'alice'"}}
	e.createValidating(p, validatingBinding("b", p.Name, admissionregistrationv1.Deny))
	q := validatingPolicy("not-42", admissionregistrationv1.Validation{Expression: "object.spec.replicas != 42", Message: "not 42"})
	q.Spec.MatchConstraints.ExcludeResourceRules = widgetRules("*")
	q.Spec.MatchConstraints.ExcludeResourceRules[0].ResourceNames = []string{"skip"}
	e.createValidating(q, validatingBinding("not-42", q.Name, admissionregistrationv1.Deny))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 42), nil, widgetsV1), oi)
		return errorIs(err, "not 42")
	})
	if _, err := e.admit(attrs(widget("skip", 42), nil, widgetsV1), oi); err != nil {
		t.Errorf("excludeResourceRules: %v", err)
	}
	if _, err := e.admit(attrs(widget("w", 10), nil, widgetsV1), oi); err != nil {
		t.Errorf("matchConditions exclude alice: %v", err)
	}
}

func TestValidatingPolicyWarnAndAudit(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("max-replicas",
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", Message: "at most 5 replicas"})
	p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
	e.createValidating(p, validatingBinding("warn", p.Name, admissionregistrationv1.Warn, admissionregistrationv1.Audit))
	oi := NewObjectInterfaces(widgetFuncs)

	var warnings []string
	a := attrs(widget("w1", 10), nil, widgetsV1)
	eventually(t, func() error {
		a = attrs(widget("w1", 10), nil, widgetsV1)
		var err error
		warnings, err = e.admit(a, oi)
		if err != nil {
			return err
		}
		if len(warnings) == 0 {
			return errors.New("no warning")
		}
		return nil
	})
	want := []string{"Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'warn': at most 5 replicas"}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	got := AuditAnnotations(a, auditinternal.LevelMetadata)
	if got["max-replicas/replicas"] != "10" {
		t.Errorf("audit annotations %v: no max-replicas/replicas=10", got)
	}
	failure := got["validation.policy.admission.k8s.io/validation_failure"]
	wantFailure := `[{"message":"at most 5 replicas","policy":"max-replicas","binding":"warn","expressionIndex":0,"validationActions":["Warn","Audit"]}]`
	if failure != wantFailure {
		t.Errorf("validation_failure %s, want %s", failure, wantFailure)
	}
	if got := AuditAnnotations(a, auditinternal.LevelNone); len(got) != 0 {
		t.Errorf("annotations at level None: %v", got)
	}
}

func TestValidatingPolicyParams(t *testing.T) {
	e := newEnv(t, Options{})
	if _, err := e.client.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"},
		Data:       map[string]string{"max": "3"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := validatingPolicy("max-replicas", admissionregistrationv1.Validation{
		Expression:        "object.spec.replicas <= int(params.data.max)",
		MessageExpression: "'at most ' + params.data.max + ' replicas'",
	})
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	b := validatingBinding("limits", p.Name, admissionregistrationv1.Deny)
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default",
		ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	e.createValidating(p, b)
	oi := NewObjectInterfaces(widgetFuncs)

	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w1", 4), nil, widgetsV1), oi)
		return errorIs(err, "denied request: at most 3 replicas")
	})
	if _, err := e.admit(attrs(widget("w1", 3), nil, widgetsV1), oi); err != nil {
		t.Fatal(err)
	}

	// A param that is not there: Deny, then Allow.
	b.Spec.ParamRef.Name = "missing"
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w1", 1), nil, widgetsV1), oi)
		return errorIs(err, "no params found for policy binding with `Deny` parameterNotFoundAction")
	})
	b.Spec.ParamRef.ParameterNotFoundAction = ptr.To(admissionregistrationv1.AllowAction)
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w1", 100), nil, widgetsV1), oi)
		return err
	})
}

// A policy on a built-in resource, whose objects are unstructured too.
func TestValidatingPolicyOnConfigMaps(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("no-passwords", admissionregistrationv1.Validation{
		Expression: "!has(object.data) || !('password' in object.data)", Message: "no passwords in ConfigMaps"})
	p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}}
	p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}}
	e.createValidating(p, validatingBinding("b", p.Name, admissionregistrationv1.Deny))
	oi := NewObjectInterfaces(ResourceFuncs{})
	cm := func(ns string, data map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": ns}, "data": data,
		}}
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(cm("default", map[string]any{"password": "x"}), nil, configMaps), oi)
		return errorIs(err, `configmaps "c" is forbidden: ValidatingAdmissionPolicy 'no-passwords' with binding 'b' denied request: no passwords in ConfigMaps`)
	})
	if _, err := e.admit(attrs(cm("default", map[string]any{"user": "x"}), nil, configMaps), oi); err != nil {
		t.Error(err)
	}
	// Another namespace is not selected.
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"kubernetes.io/metadata.name": "other"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(cm("other", map[string]any{"password": "x"}), nil, configMaps), oi)
		return err
	})
}

// matchPolicy Equivalent: a policy on v2 sees a v1 request converted to v2.
func TestValidatingPolicyEquivalent(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("max-size", admissionregistrationv1.Validation{
		Expression:        "object.spec.size <= 5",
		MessageExpression: "'size ' + string(object.spec.size) + ' in ' + object.apiVersion",
	})
	p.Spec.MatchConstraints.ResourceRules = widgetRules("v2")
	e.createValidating(p, validatingBinding("b", p.Name, admissionregistrationv1.Deny))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 10), nil, widgetsV1), oi)
		return errorIs(err, "denied request: size 10 in example.com/v2")
	})

	p.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionregistrationv1.Exact)
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 10), nil, widgetsV1), oi)
		return err
	})
}

// A policy that does not compile fails as its failurePolicy says, and
// breaks nothing else.
func TestValidatingPolicyCompileError(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("broken", admissionregistrationv1.Validation{Expression: "object.spec.replicas <="})
	e.createValidating(p, validatingBinding("b", p.Name, admissionregistrationv1.Deny))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		return errorIs(err, "compilation error")
	})
	p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	p.ResourceVersion = "2" // the fake client keeps it; policies are compiled again when it changes
	if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w", 1), nil, widgetsV1), oi)
		return err
	})
}

func TestMutatingPolicyApplyConfiguration(t *testing.T) {
	e := newEnv(t, Options{})
	e.createMutating(mutatingPolicy("label", admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
			Expression: `Object{metadata: Object.metadata{labels: {"owner": request.userInfo.username}}}`,
		},
	}))
	oi := NewObjectInterfaces(widgetFuncs)
	var w *unstructured.Unstructured
	eventually(t, func() error {
		w = widget("w", 1)
		if _, err := e.admit(attrs(w, nil, widgetsV1), oi); err != nil {
			return err
		}
		if w.GetLabels()["owner"] != "alice" {
			return fmt.Errorf("labels %v", w.GetLabels())
		}
		return nil
	})
	if r, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); r != 1 {
		t.Errorf("spec changed: %v", w.Object)
	}
}

func TestMutatingPolicyJSONPatch(t *testing.T) {
	e := newEnv(t, Options{})
	e.createMutating(mutatingPolicy("double", admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{
			Expression: `[JSONPatch{op: "replace", path: "/spec/replicas", value: object.spec.replicas * 2}]`,
		},
	}))
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		w := widget("w", 3)
		if _, err := e.admit(attrs(w, nil, widgetsV1), oi); err != nil {
			return err
		}
		if r, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); r != 6 {
			return fmt.Errorf("spec %v", w.Object["spec"])
		}
		return nil
	})
}

// A mutating policy on v2 mutates a v1 request through conversion, and
// the result comes back in v1.
func TestMutatingPolicyOtherVersion(t *testing.T) {
	e := newEnv(t, Options{})
	p := mutatingPolicy("grow", admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "replace", path: "/spec/size", value: object.spec.size + 1}]`},
	})
	p.Spec.MatchConstraints.ResourceRules = widgetRules("v2")
	e.createMutating(p)
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		w := widget("w", 3)
		if _, err := e.admit(attrs(w, nil, widgetsV1), oi); err != nil {
			return err
		}
		if r, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); r != 4 || w.GetAPIVersion() != "example.com/v1" {
			return fmt.Errorf("object %v", w.Object)
		}
		return nil
	})
}

func TestNotReadyBeforeStart(t *testing.T) {
	if _, err := New(Options{Client: fake.NewClientset(), Authorizer: allowAll}); err == nil {
		t.Fatal("New without a dynamic client and a RESTMapper")
	}
	e := newEnv(t, Options{})
	a := attrs(widget("w", 1), nil, widgetsV1)
	fresh := &Admission{}
	if err := fresh.Validate(context.Background(), a, NewObjectInterfaces(widgetFuncs)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not yet ready to handle request") {
		t.Errorf("before Start: %v", err)
	}
	if err := e.adm.Start(context.Background()); err == nil {
		t.Error("Start twice")
	}
}

// Writes need admission only once something is configured: Handles is
// false after Start while no policy, binding or webhook configuration
// exists, true once one does.
func TestHandlesOnlyWhenConfigured(t *testing.T) {
	e := newEnv(t, Options{})
	for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete} {
		if e.adm.Handles(op) {
			t.Errorf("Handles(%s) with nothing configured", op)
		}
	}
	p := validatingPolicy("thirteen", admissionregistrationv1.Validation{Expression: "object.spec.replicas != 13", Message: "unlucky"})
	e.createValidating(p, validatingBinding("thirteen", p.Name, admissionregistrationv1.Deny))
	eventually(t, func() error {
		if !e.adm.Handles(admission.Create) {
			return errors.New("not handled with a policy configured")
		}
		return nil
	})
}

// TestPluginsBuiltWhenConfigured: with no policy, binding or webhook
// configuration, admission handles nothing and the plugins are not built;
// the first request once a policy exists builds them, and the policy acts.
func TestPluginsBuiltWhenConfigured(t *testing.T) {
	e := newEnv(t, Options{})
	built := func() bool { return e.adm.chain.Load().built.Load() != nil }
	if e.adm.Handles(admission.Create) || built() {
		t.Fatalf("no configuration: Handles %v, plugins built %v", e.adm.Handles(admission.Create), built())
	}
	p := validatingPolicy("max-replicas", admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5"})
	e.createValidating(p, validatingBinding("max-replicas-binding", p.Name, admissionregistrationv1.Deny))
	eventually(t, func() error {
		if !e.adm.Handles(admission.Create) {
			return errors.New("a policy exists, admission handles no create")
		}
		return nil
	})
	if !built() {
		t.Fatal("admission handles creates, the plugins are not built")
	}
	oi := NewObjectInterfaces(widgetFuncs)
	eventually(t, func() error {
		_, err := e.admit(attrs(widget("w1", 10), nil, widgetsV1), oi)
		return errorIs(err, "denied request")
	})
}
