package admissionregistration

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// fixedCaches makes the resources over empty caches.
func newResources(t *testing.T, o Options) *Resources {
	t.Helper()
	return New(func(prefix string) *store.Cache { return store.NewFixedCache(prefix, 1) }, o)
}

func byKind(r *Resources, kind string) *resource.Resource {
	for _, res := range r.All() {
		if res.Kind == kind {
			return res
		}
	}
	return nil
}

// decode makes an Object of a JSON object.
func decode(t *testing.T, v any) *resource.Object {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := resource.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// create runs what the engine runs for a new object: normalize (decode,
// default), prepare, validate metadata and the object; it returns the
// Object, the strict decoding errors and the error a client would get.
func create(t *testing.T, res *resource.Resource, ctx context.Context, v any) (*resource.Object, []error, error) {
	t.Helper()
	obj := decode(t, v)
	strict, err := res.Strategy.(resource.Normalizer).Normalize(obj)
	if err != nil {
		return nil, nil, err
	}
	res.Strategy.PrepareForCreate(ctx, obj)
	errs := validation.ValidateObjectMetaAccessor(&obj.Meta, false, validation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, res.Strategy.Validate(ctx, obj)...)
	if len(errs) > 0 {
		return obj, strict, apierrors.NewInvalid(schema.GroupKind{Group: admissionv1.GroupName, Kind: res.Kind}, obj.Meta.Name, errs)
	}
	return obj, strict, nil
}

// kubeCase is one create sent to kube-apiserver v1.37.2, with its answer.
type kubeCase struct {
	Name    string         `json:"name"`
	Object  map[string]any `json:"object"`
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Causes  []struct {
		Reason, Field, Message string
	} `json:"causes"`
	Warnings []string       `json:"warnings"`
	Created  map[string]any `json:"created"`
}

// TestCreateMatchesKubernetes sends the objects of
// testdata/kube-v1.37.2-create.json (defaults, every validation rule's
// common mistakes, CEL compilation errors, warnings) through the rules
// of their kind, and expects kube-apiserver's answers word for word:
// the 422 message and causes, the 400 of a body that does not decode,
// the created object with its defaults, the warnings.
func TestCreateMatchesKubernetes(t *testing.T) {
	data, err := os.ReadFile("testdata/kube-v1.37.2-create.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []kubeCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	r := newResources(t, Options{})
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			res := byKind(r, c.Object["kind"].(string))
			obj, strict, err := create(t, res, context.Background(), c.Object)
			switch c.Code {
			case 400:
				if err == nil || err.Error() != c.Message {
					t.Fatalf("got %v\nwant %s", err, c.Message)
				}
				return
			case 422:
				status, ok := err.(apierrors.APIStatus)
				if !ok || err.Error() != c.Message {
					t.Fatalf("got %v\nwant %s", err, c.Message)
				}
				causes := status.Status().Details.Causes
				if len(causes) != len(c.Causes) {
					t.Fatalf("got causes %+v\nwant %+v", causes, c.Causes)
				}
				for i, cause := range causes {
					if want := c.Causes[i]; string(cause.Type) != want.Reason || cause.Field != want.Field || cause.Message != want.Message {
						t.Errorf("cause %d: got %+v\nwant %+v", i, cause, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for _, s := range strict {
				warnings = append(warnings, s.Error())
			}
			warnings = append(warnings, res.Strategy.(resource.Warner).WarningsOnCreate(context.Background(), obj)...)
			if !reflect.DeepEqual(warnings, c.Warnings) {
				t.Errorf("warnings %q\nwant %q", warnings, c.Warnings)
			}
			got := map[string]any{}
			raw, err := obj.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.Created) {
				t.Errorf("created %v\nwant %v", got, c.Created)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	vwc := &admissionv1.ValidatingWebhookConfiguration{Webhooks: []admissionv1.ValidatingWebhook{{
		ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "s", Namespace: "n"}},
		Rules:        []admissionv1.RuleWithOperations{{}},
	}}}
	DefaultValidatingWebhookConfiguration(vwc)
	h := vwc.Webhooks[0]
	if *h.FailurePolicy != admissionv1.Fail || *h.MatchPolicy != admissionv1.Equivalent || *h.TimeoutSeconds != 10 ||
		h.NamespaceSelector == nil || h.ObjectSelector == nil || *h.ClientConfig.Service.Port != 443 || *h.Rules[0].Scope != admissionv1.AllScopes {
		t.Errorf("validating webhook defaults: %+v", h)
	}
	if h.SideEffects != nil || h.AdmissionReviewVersions != nil {
		t.Errorf("sideEffects and admissionReviewVersions have no default: %+v", h)
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{Webhooks: []admissionv1.MutatingWebhook{{TimeoutSeconds: ptr.To[int32](3)}}}
	DefaultMutatingWebhookConfiguration(mwc)
	if m := mwc.Webhooks[0]; *m.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy || *m.TimeoutSeconds != 3 {
		t.Errorf("mutating webhook defaults: %+v", m)
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{Spec: admissionv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1.MatchResources{
		ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{{}}}}}
	DefaultValidatingAdmissionPolicy(vap)
	if mc := vap.Spec.MatchConstraints; *vap.Spec.FailurePolicy != admissionv1.Fail || *mc.MatchPolicy != admissionv1.Equivalent ||
		mc.NamespaceSelector == nil || mc.ObjectSelector == nil || *mc.ExcludeResourceRules[0].Scope != admissionv1.AllScopes {
		t.Errorf("policy defaults: %+v", vap.Spec)
	}
	mp := &admissionv1.MutatingAdmissionPolicy{}
	DefaultMutatingAdmissionPolicy(mp)
	if *mp.Spec.FailurePolicy != admissionv1.Fail || mp.Spec.ReinvocationPolicy != "" || mp.Spec.MatchConstraints != nil {
		t.Errorf("mutating policy defaults: %+v", mp.Spec)
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{ParamRef: &admissionv1.ParamRef{Name: "p"}}}
	DefaultValidatingAdmissionPolicyBinding(b)
	if b.Spec.ParamRef.ParameterNotFoundAction != nil || b.Spec.MatchResources != nil {
		t.Errorf("binding defaults: %+v", b.Spec)
	}
}

func validPolicy(name string) map[string]any {
	return map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"operations": []any{"CREATE"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps"}}}},
			"validations": []any{map[string]any{"expression": "true"}},
		},
		"status": map[string]any{"observedGeneration": int64(4)},
	}
}

// update runs what the engine runs for an update (sub "" or "status").
func update(t *testing.T, res *resource.Resource, obj, old *resource.Object, sub string) field.ErrorList {
	t.Helper()
	ctx := context.Background()
	obj.Meta.Generation = old.Meta.Generation
	if sub == "status" {
		res.Strategy.(resource.StatusStrategy).PrepareForStatusUpdate(ctx, obj, old)
		return res.Strategy.(resource.StatusStrategy).ValidateStatusUpdate(ctx, obj, old)
	}
	if _, err := res.Strategy.(resource.Normalizer).Normalize(obj); err != nil {
		t.Fatal(err)
	}
	res.Strategy.PrepareForUpdate(ctx, obj, old)
	return res.Strategy.ValidateUpdate(ctx, obj, old)
}

func TestPolicyGenerationAndStatus(t *testing.T) {
	res := newResources(t, Options{}).ValidatingAdmissionPolicies
	old, _, err := create(t, res, context.Background(), validPolicy("p"))
	if err != nil {
		t.Fatal(err)
	}
	if old.Meta.Generation != 1 || !reflect.DeepEqual(old.Content["status"], map[string]any{}) {
		t.Fatalf("created: generation %d, status %v", old.Meta.Generation, old.Content["status"])
	}
	old.Content["status"] = map[string]any{"observedGeneration": int64(1)}

	// Labels and status: no new generation, the status stays.
	obj := old.DeepCopy()
	obj.Meta.Labels = map[string]string{"c": "d"}
	obj.Content["status"] = map[string]any{"observedGeneration": int64(9)}
	if errs := update(t, res, obj, old, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	if obj.Meta.Generation != 1 || !reflect.DeepEqual(obj.Content["status"], map[string]any{"observedGeneration": int64(1)}) {
		t.Errorf("metadata update: generation %d, status %v", obj.Meta.Generation, obj.Content["status"])
	}
	// A spec change: the next generation.
	obj = old.DeepCopy()
	_ = unstructured.SetNestedField(obj.Content, "Ignore", "spec", "failurePolicy")
	if errs := update(t, res, obj, old, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	if obj.Meta.Generation != 2 {
		t.Errorf("spec update: generation %d", obj.Meta.Generation)
	}
	// The status subresource changes the status only.
	obj = old.DeepCopy()
	_ = unstructured.SetNestedField(obj.Content, "Ignore", "spec", "failurePolicy")
	obj.Meta.Labels = map[string]string{"c": "d"}
	obj.Content["status"] = map[string]any{"observedGeneration": int64(1), "typeChecking": map[string]any{
		"expressionWarnings": []any{map[string]any{"fieldRef": "spec.validations[0].expression", "warning": "w"}}}}
	if errs := update(t, res, obj, old, "status"); len(errs) > 0 {
		t.Fatal(errs)
	}
	p, _ := resource.Typed[admissionv1.ValidatingAdmissionPolicy](obj)
	if *p.Spec.FailurePolicy != admissionv1.Fail || p.Labels["a"] != "b" || len(p.Status.TypeChecking.ExpressionWarnings) != 1 || obj.Meta.Generation != 1 {
		t.Errorf("status update: %+v", p)
	}
	// Kubernetes' status validation.
	obj = old.DeepCopy()
	obj.Content["status"] = map[string]any{"typeChecking": map[string]any{"expressionWarnings": []any{
		map[string]any{"fieldRef": "", "warning": ""}, map[string]any{"fieldRef": "a[", "warning": "x"}}}}
	got := errorStrings(update(t, res, obj, old, "status"))
	want := []string{
		"status.typeChecking.expressionWarnings[0].warning: Required value",
		"status.typeChecking.expressionWarnings[0].fieldRef: Required value",
		`status.typeChecking.expressionWarnings[1].fieldRef: Invalid value: "a[": invalid JSONPath: unterminated array`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status validation %q\nwant %q", got, want)
	}
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestWebhookGeneration(t *testing.T) {
	res := newResources(t, Options{}).ValidatingWebhookConfigurations
	hook := map[string]any{"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": []any{"v1"}, "clientConfig": map[string]any{"url": "https://x/"}}
	old, _, err := create(t, res, context.Background(), map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "w"}, "webhooks": []any{hook}})
	if err != nil {
		t.Fatal(err)
	}
	obj := old.DeepCopy()
	obj.Meta.Annotations = map[string]string{"x": "y"}
	if errs := update(t, res, obj, old, ""); len(errs) > 0 || obj.Meta.Generation != 1 {
		t.Fatalf("metadata update: %v, generation %d", errs, obj.Meta.Generation)
	}
	obj = old.DeepCopy()
	_ = unstructured.SetNestedSlice(obj.Content, []any{hook, map[string]any{"name": "b.b.c", "sideEffects": "None",
		"admissionReviewVersions": []any{"v1"}, "clientConfig": map[string]any{"url": "https://x/"}}}, "webhooks")
	if errs := update(t, res, obj, old, ""); len(errs) > 0 || obj.Meta.Generation != 2 {
		t.Fatalf("webhooks update: %v, generation %d", errs, obj.Meta.Generation)
	}
}

// TestUpdateKeepsWhatWasAccepted: what a stored configuration already had
// stays accepted on update, as in Kubernetes (side effects of v1beta1
// webhooks, unrecognized review versions, duplicate names, invalid label
// values in selectors, match conditions left as they were).
func TestUpdateKeepsWhatWasAccepted(t *testing.T) {
	hook := admissionv1.ValidatingWebhook{Name: "a.b.c", SideEffects: ptr.To(admissionv1.SideEffectClassSome), AdmissionReviewVersions: []string{"v9"},
		ClientConfig:      admissionv1.WebhookClientConfig{URL: ptr.To("https://x/")},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}}}},
		MatchConditions:   []admissionv1.MatchCondition{{Name: "m", Expression: "object.x +"}}}
	old := []admissionv1.ValidatingWebhook{hook, hook}
	if errs := validateWebhookConfiguration(validatingWebhooks(old), validatingWebhooks(old), true); len(errs) > 0 {
		t.Errorf("stored webhooks: %v", errs)
	}
	got := errorStrings(validateWebhookConfiguration(validatingWebhooks(old), nil, false))
	want := []string{
		`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`,
		`webhooks[0].namespaceSelector.matchExpressions[0].values[0]: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		"webhooks[0].matchConditions[0].expression: Invalid value: \"object.x +\": compilation failed: ERROR: <input>:1:11: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.x +\n | ..........^",
		`webhooks[0].admissionReviewVersions: Invalid value: ["v9"]: must include at least one of v1, v1beta1`,
	}
	if len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) {
		t.Errorf("new webhooks %q\nwant at first %q", got, want)
	}
	// A change of the match conditions has them all compiled again.
	hook.MatchConditions = []admissionv1.MatchCondition{{Name: "m", Expression: "true"}}
	old = []admissionv1.ValidatingWebhook{hook, hook}
	changed := []admissionv1.ValidatingWebhook{hook, hook}
	changed[1].MatchConditions = []admissionv1.MatchCondition{{Name: "n", Expression: "1"}}
	got = errorStrings(validateWebhookConfiguration(validatingWebhooks(changed), validatingWebhooks(old), true))
	if len(got) != 1 || got[0] != `webhooks[1].matchConditions[0].expression: Invalid value: "1": must evaluate to bool but got int` {
		t.Errorf("changed match conditions %q", got)
	}
}

// fakeAuthorizer allows what allow says.
type fakeAuthorizer func(a authorizer.Attributes) bool

func (f fakeAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if f(a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

var _ auth.Authorizer = fakeAuthorizer(nil)

func TestParamAuthorization(t *testing.T) {
	var asked []authorizer.AttributesRecord
	allowGetConfigMaps := fakeAuthorizer(func(a authorizer.Attributes) bool {
		asked = append(asked, authorizer.AttributesRecord{Verb: a.GetVerb(), APIGroup: a.GetAPIGroup(), APIVersion: a.GetAPIVersion(),
			Resource: a.GetResource(), Name: a.GetName(), Namespace: a.GetNamespace()})
		return a.GetVerb() == "get" && a.GetResource() == "configmaps"
	})
	resolve := func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		if gvk.Kind == "ConfigMap" && gvk.Group == "" {
			return gvk.GroupVersion().WithResource("configmaps"), nil
		}
		return schema.GroupVersionResource{}, os.ErrNotExist
	}
	a := &paramAuthorizer{authz: allowGetConfigMaps, resolve: resolve}
	alice := auth.WithUser(context.Background(), &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}})
	admin := auth.WithUser(context.Background(), &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	const who = "&{alice  [system:authenticated] map[]}"

	if errs := a.authorizeParamKind(alice, &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}); len(errs) > 0 {
		t.Errorf("configmaps: %v", errs)
	}
	if want := (authorizer.AttributesRecord{Verb: "get", APIVersion: "v1", Resource: "configmaps", Name: "*", Namespace: "*"}); !reflect.DeepEqual(asked[0], want) {
		t.Errorf("asked %+v", asked[0])
	}
	got := errorStrings(a.authorizeParamKind(alice, &admissionv1.ParamKind{APIVersion: "example.com/v1", Kind: "Nothing"}))
	if want := `spec.paramKind: Forbidden: user ` + who + ` must have "get" permission on all objects of the referenced paramKind (kind=Nothing, apiVersion=example.com/v1)`; len(got) != 1 || got[0] != want {
		t.Errorf("unknown kind %q", got)
	}
	if errs := a.authorizeParamKind(admin, &admissionv1.ParamKind{APIVersion: "example.com/v1", Kind: "Nothing"}); len(errs) > 0 {
		t.Errorf("superuser: %v", errs)
	}

	policies := map[string]*admissionv1.ParamKind{"cm": {APIVersion: "v1", Kind: "ConfigMap"}, "none": nil, "bad": {APIVersion: "a/b/c", Kind: "X"}, "unknown": {APIVersion: "x/v1", Kind: "X"}}
	kindOf := func(_ context.Context, name string) (*admissionv1.ParamKind, bool) {
		pk, ok := policies[name]
		return pk, ok
	}
	for _, c := range []struct {
		policy   string
		ref      admissionv1.ParamRef
		mutating bool
		want     string
	}{
		{"cm", admissionv1.ParamRef{Name: "x", Namespace: "default"}, false, ""},
		{"cm", admissionv1.ParamRef{Selector: &metav1.LabelSelector{}}, false, `spec.paramRef: Forbidden: user ` + who + ` does not have "list" permission on the object referenced by paramRef`},
		{"cm", admissionv1.ParamRef{Selector: &metav1.LabelSelector{}}, true, `spec.paramRef: Forbidden: user list does not have "` + who + `" permission on the object referenced by paramRef`},
		{"missing", admissionv1.ParamRef{Name: "x"}, false, `spec.paramRef: Forbidden: unable to get policy missing to determine minimum required permissions and user ` + who + ` does not have "get" permission for all groups, versions and resources`},
		{"none", admissionv1.ParamRef{Name: "x"}, false, `spec.paramRef: Forbidden: user ` + who + ` does not have "get" permission on the object referenced by paramRef`},
		{"bad", admissionv1.ParamRef{Name: "x"}, false, `spec.paramRef: Forbidden: unable to parse paramKind &{a/b/c X} to determine minimum required permissions and user ` + who + ` does not have "get" permission for all groups, versions and resources`},
		{"unknown", admissionv1.ParamRef{Name: "x"}, false, `spec.paramRef: Forbidden: unable to resolve paramKind &{x/v1 X} to determine minimum required permissions and user ` + who + ` does not have "get" permission for all groups, versions and resources`},
	} {
		got := strings.Join(errorStrings(a.authorizeParamRef(alice, c.policy, &c.ref, kindOf, c.mutating)), "\n")
		if got != c.want {
			t.Errorf("%s %+v: %q\nwant %q", c.policy, c.ref, got, c.want)
		}
	}
}

func TestTables(t *testing.T) {
	objs := func(items ...map[string]any) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range items {
			out = append(out, &unstructured.Unstructured{Object: o})
		}
		return out
	}
	ctx := context.Background()
	tbl, _ := webhookTable{}.ConvertToTable(ctx, "v1", objs(map[string]any{"metadata": map[string]any{"name": "w"}, "webhooks": []any{map[string]any{}, map[string]any{}}}), false)
	if len(tbl.ColumnDefinitions) != 3 || tbl.ColumnDefinitions[1].Name != "Webhooks" || tbl.Rows[0].Cells[0] != "w" || tbl.Rows[0].Cells[1] != int64(2) {
		t.Errorf("webhooks: %+v", tbl)
	}
	tbl, _ = policyTable{validating: true}.ConvertToTable(ctx, "v1", objs(
		map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"validations": []any{map[string]any{}}}},
		map[string]any{"metadata": map[string]any{"name": "q"}, "spec": map[string]any{"paramKind": map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}}), false)
	if names := []string{tbl.ColumnDefinitions[1].Name, tbl.ColumnDefinitions[2].Name}; !reflect.DeepEqual(names, []string{"Validations", "ParamKind"}) ||
		!reflect.DeepEqual(tbl.Rows[0].Cells[:3], []any{"p", int64(1), "<unset>"}) || !reflect.DeepEqual(tbl.Rows[1].Cells[:3], []any{"q", int64(0), "v1/ConfigMap"}) {
		t.Errorf("policies: %+v", tbl)
	}
	tbl, _ = policyTable{}.ConvertToTable(ctx, "v1", nil, false)
	if tbl.ColumnDefinitions[1].Name != "Mutations" {
		t.Errorf("mutating policies: %+v", tbl)
	}
	tbl, _ = bindingTable{}.ConvertToTable(ctx, "v1", objs(
		map[string]any{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"policyName": "p"}},
		map[string]any{"metadata": map[string]any{"name": "b"}, "spec": map[string]any{"policyName": "p", "paramRef": map[string]any{"name": "x"}}},
		map[string]any{"metadata": map[string]any{"name": "c"}, "spec": map[string]any{"policyName": "p", "paramRef": map[string]any{"name": "x", "namespace": "ns"}}},
		map[string]any{"metadata": map[string]any{"name": "d"}, "spec": map[string]any{"policyName": "p", "paramRef": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}), true)
	var cells []any
	for _, r := range tbl.Rows {
		cells = append(cells, r.Cells[2])
	}
	want := []any{"<unset>", "*/x", "ns/x", "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}"}
	if tbl.ColumnDefinitions != nil || !reflect.DeepEqual(cells, want) {
		t.Errorf("bindings: %v", cells)
	}
}

func TestResolver(t *testing.T) {
	crd := func(name string, established bool) *store.Item {
		status := "False"
		if established {
			status = "True"
		}
		raw, _ := json.Marshal(map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"group": strings.SplitN(name, ".", 2)[1], "scope": "Namespaced",
				"names":    map[string]any{"plural": strings.SplitN(name, ".", 2)[0], "kind": "Widget"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}, map[string]any{"name": "v0", "served": false}}},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
		})
		return &store.Item{Key: "/registry/apiextensions.k8s.io/customresourcedefinitions/" + name, Name: name, Raw: raw}
	}
	crds := store.NewFixedCache("/registry/apiextensions.k8s.io/customresourcedefinitions/", 1, crd("widgets.example.com", true), crd("widgets.pending.io", false))
	r := newResources(t, Options{})
	resolve := Resolver(r.All, crds)
	for gvk, want := range map[schema.GroupVersionKind]string{
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}: "validatingadmissionpolicies",
		{Group: "admissionregistration.k8s.io", Version: "v2", Kind: "ValidatingAdmissionPolicy"}: "",
		{Group: "example.com", Version: "v1", Kind: "Widget"}:                                     "widgets",
		{Group: "example.com", Version: "v0", Kind: "Widget"}:                                     "",
		{Group: "pending.io", Version: "v1", Kind: "Widget"}:                                      "",
		{Version: "v1", Kind: "ConfigMap"}:                                                        "",
	} {
		gvr, err := resolve(gvk)
		if gvr.Resource != want || (err == nil) != (want != "") {
			t.Errorf("%v: %v %v, want %q", gvk, gvr, err, want)
		}
	}
}
