package integration

import (
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kptr "k8s.io/utils/ptr"
)

// The answers below are kube-apiserver v1.37.2's to the same requests,
// taken from a real one.

var configMapRules = []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
	Operations: []admissionv1.OperationType{admissionv1.Create},
	Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}}

func TestAdmissionWebhookConfigurations(t *testing.T) {
	e := start(t)
	ctx := e.ctx
	vwcs := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	w, err := vwcs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Created through the typed clientset (protobuf), with Kubernetes'
	// defaults.
	hook := admissionv1.ValidatingWebhook{Name: "a.example.com", SideEffects: kptr.To(admissionv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "default", Name: "svc"}},
		Rules:        []admissionv1.RuleWithOperations{configMapRules[0].RuleWithOperations}}
	vwc, err := vwcs.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Webhooks: []admissionv1.ValidatingWebhook{hook}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := vwc.Webhooks[0]
	if vwc.Generation != 1 || *h.FailurePolicy != admissionv1.Fail || *h.MatchPolicy != admissionv1.Equivalent || *h.TimeoutSeconds != 10 ||
		h.NamespaceSelector == nil || h.ObjectSelector == nil || *h.ClientConfig.Service.Port != 443 || *h.Rules[0].Scope != admissionv1.AllScopes {
		t.Fatalf("defaults: %+v", vwc)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*admissionv1.ValidatingWebhookConfiguration); ev.Type != watch.Added || !ok || got.Name != "w" {
			t.Fatalf("watch: %v %T", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	// A change of the webhooks is a new generation; of the metadata, not.
	vwc.Labels = map[string]string{"a": "b"}
	if vwc, err = vwcs.Update(ctx, vwc, metav1.UpdateOptions{}); err != nil || vwc.Generation != 1 {
		t.Fatalf("label update: %v %+v", err, vwc)
	}
	vwc.Webhooks[0].TimeoutSeconds = kptr.To[int32](5)
	if vwc, err = vwcs.Update(ctx, vwc, metav1.UpdateOptions{}); err != nil || vwc.Generation != 2 {
		t.Fatalf("webhook update: %v %+v", err, vwc)
	}
	// An update needs a resourceVersion.
	vwc.ResourceVersion = ""
	_, err = vwcs.Update(ctx, vwc, metav1.UpdateOptions{})
	expectInvalid(t, err, `validatingwebhookconfigurations.admissionregistration.k8s.io "w" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`,
		"metadata.resourceVersion: Invalid value: 0: must be specified for an update")

	// Server-side apply of a mutating configuration: defaulted, and
	// managed by its applier.
	mwcs := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mwc, err := mwcs.Apply(ctx, admissionv1ac.MutatingWebhookConfiguration("m").WithWebhooks(admissionv1ac.MutatingWebhook().
		WithName("m.example.com").WithSideEffects(admissionv1.SideEffectClassNoneOnDryRun).WithAdmissionReviewVersions("v1", "v1beta1").
		WithClientConfig(admissionv1ac.WebhookClientConfig().WithURL("https://hooks.example.com/m"))), metav1.ApplyOptions{FieldManager: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if m := mwc.Webhooks[0]; *m.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy || *m.TimeoutSeconds != 10 || len(mwc.ManagedFields) != 1 || mwc.ManagedFields[0].Manager != "tester" {
		t.Fatalf("apply: %+v", mwc)
	}

	// Invalid configurations.
	_, err = vwcs.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Webhooks: []admissionv1.ValidatingWebhook{{}}}, metav1.CreateOptions{})
	expectInvalid(t, err, `ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: [webhooks[0].name: Required value, webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, webhooks[0].clientConfig: Required value: exactly one of url or service is required, webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]`,
		"webhooks[0].name: Required value", "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
		"webhooks[0].clientConfig: Required value: exactly one of url or service is required", "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1")
	dup := hook
	dup.ClientConfig = admissionv1.WebhookClientConfig{URL: kptr.To("https://x/"), Service: &admissionv1.ServiceReference{Namespace: "n", Name: "s"}}
	first := hook
	first.ClientConfig = admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "s"}}
	first.Rules = nil
	_, err = vwcs.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Webhooks: []admissionv1.ValidatingWebhook{first, dup}}, metav1.CreateOptions{})
	// Kubernetes reports a missing service namespace on the name.
	expectInvalid(t, err, `ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: [webhooks[0].clientConfig.service.name: Required value, webhooks[1].clientConfig: Required value: exactly one of url or service is required, webhooks[1].name: Duplicate value: "a.example.com"]`,
		"webhooks[0].clientConfig.service.name: Required value", "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
		`webhooks[1].name: Duplicate value: "a.example.com"`)
	_, err = mwcs.Create(ctx, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Webhooks: []admissionv1.MutatingWebhook{{
		Name: "a.b.c", SideEffects: kptr.To(admissionv1.SideEffectClassSome), TimeoutSeconds: kptr.To[int32](60), AdmissionReviewVersions: []string{"v2"},
		ClientConfig: admissionv1.WebhookClientConfig{URL: kptr.To("http://x/")}}}}, metav1.CreateOptions{})
	expectInvalid(t, err, `MutatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: [webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun", webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds, webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path], webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1]`,
		`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`,
		"webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds",
		`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`,
		`webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1`)

	// kubectl's table: Name, Webhooks, Age.
	r := e.do("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"name":"Webhooks","type":"integer"`) || !contains(r.body, `"cells":["w",1,`) {
		t.Fatalf("table: %d %s", r.code, r.body)
	}

	if err := vwcs.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vwcs.Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if err := mwcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, err := mwcs.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("after deletecollection: %v %+v", err, l)
	}
}

func TestAdmissionPolicies(t *testing.T) {
	e := start(t)
	ctx := e.ctx
	vaps := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	vap, err := vaps.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: configMapRules},
			Validations:      []admissionv1.Validation{{Expression: "object.metadata.name != params.data.forbidden"}},
		},
		Status: admissionv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 7}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vap.Generation != 1 || *vap.Spec.FailurePolicy != admissionv1.Fail || *vap.Spec.MatchConstraints.MatchPolicy != admissionv1.Equivalent || vap.Status.ObservedGeneration != 0 {
		t.Fatalf("create: %+v", vap)
	}

	// The status belongs to the status subresource, which changes nothing
	// else and keeps the generation.
	vap.Status = admissionv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 1, TypeChecking: &admissionv1.TypeChecking{
		ExpressionWarnings: []admissionv1.ExpressionWarning{{FieldRef: "spec.validations[0].expression", Warning: "w"}}}}
	vap.Spec.FailurePolicy = kptr.To(admissionv1.Ignore)
	if vap, err = vaps.UpdateStatus(ctx, vap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if vap.Generation != 1 || vap.Status.ObservedGeneration != 1 || *vap.Spec.FailurePolicy != admissionv1.Fail {
		t.Fatalf("status update: %+v", vap)
	}
	vap.Spec.FailurePolicy = kptr.To(admissionv1.Ignore)
	vap.Status.ObservedGeneration = 9
	if vap, err = vaps.Update(ctx, vap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if vap.Generation != 2 || vap.Status.ObservedGeneration != 1 || *vap.Spec.FailurePolicy != admissionv1.Ignore {
		t.Fatalf("spec update: %+v", vap)
	}
	vap.Status.TypeChecking.ExpressionWarnings[0].Warning = ""
	_, err = vaps.UpdateStatus(ctx, vap, metav1.UpdateOptions{})
	expectInvalid(t, err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: status.typeChecking.expressionWarnings[0].warning: Required value`,
		"status.typeChecking.expressionWarnings[0].warning: Required value")

	// Server-side apply.
	applied, err := vaps.Apply(ctx, admissionv1ac.ValidatingAdmissionPolicy("q").WithSpec(admissionv1ac.ValidatingAdmissionPolicySpec().
		WithMatchConstraints(admissionv1ac.MatchResources().WithResourceRules(admissionv1ac.NamedRuleWithOperations().
			WithOperations(admissionv1.Create).WithAPIGroups("").WithAPIVersions("v1").WithResources("configmaps"))).
		WithAuditAnnotations(admissionv1ac.AuditAnnotation().WithKey("k").WithValueExpression("'v'"))), metav1.ApplyOptions{FieldManager: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Generation != 1 || *applied.Spec.FailurePolicy != admissionv1.Fail || applied.ManagedFields[0].Manager != "tester" {
		t.Fatalf("apply: %+v", applied)
	}
	if _, err := vaps.ApplyStatus(ctx, admissionv1ac.ValidatingAdmissionPolicy("q").WithStatus(admissionv1ac.ValidatingAdmissionPolicyStatus().WithObservedGeneration(1)),
		metav1.ApplyOptions{FieldManager: "status-tester"}); err != nil {
		t.Fatal(err)
	}

	// Bindings.
	vapbs := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	b, err := vapbs.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "p", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		ParamRef:       &admissionv1.ParamRef{Name: "params", Namespace: "default", ParameterNotFoundAction: kptr.To(admissionv1.DenyAction)},
		MatchResources: &admissionv1.MatchResources{},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Generation != 1 || *b.Spec.MatchResources.MatchPolicy != admissionv1.Equivalent || b.Spec.MatchResources.NamespaceSelector == nil {
		t.Fatalf("binding: %+v", b)
	}
	r := e.do("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"name":"PolicyName"`) || !contains(r.body, `"cells":["b","p","default/params",`) {
		t.Fatalf("binding table: %d %s", r.code, r.body)
	}
	r = e.do("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"cells":["p",1,"v1/ConfigMap",`) || !contains(r.body, `"cells":["q",0,"\u003cunset\u003e",`) {
		t.Fatalf("policy table: %d %s", r.code, r.body)
	}

	// Mutating policies and their bindings; no status subresource.
	maps := e.kube.AdmissionregistrationV1().MutatingAdmissionPolicies()
	mp, err := maps.Create(ctx, &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "mp"}, Spec: admissionv1.MutatingAdmissionPolicySpec{
		MatchConstraints:   &admissionv1.MatchResources{ResourceRules: configMapRules},
		ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: "Object{metadata: Object.metadata{labels: {'mutated': 'true'}}}"}}},
	}}, metav1.CreateOptions{})
	if err != nil || mp.Generation != 1 || *mp.Spec.FailurePolicy != admissionv1.Fail {
		t.Fatalf("mutating policy: %v %+v", err, mp)
	}
	if r := e.do("GET", "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/mp/status", ""); r.code != 404 {
		t.Fatalf("mutating policy status: %d %s", r.code, r.body)
	}
	mapbs := e.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	if _, err := mapbs.Create(ctx, &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "mb"},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "mp"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Invalid policies and bindings.
	_, err = vaps.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}, metav1.CreateOptions{})
	expectInvalid(t, err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "bad" is invalid: [spec.matchConstraints: Required value, spec.validations: Required value: validations or auditAnnotations must contain at least one item, spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item]`,
		"spec.matchConstraints: Required value", "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
		"spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item")
	_, err = vaps.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: configMapRules},
		Validations:      []admissionv1.Validation{{Expression: "params.x == 1"}, {Expression: "object.metadata.name"}},
	}}, metav1.CreateOptions{})
	expectInvalid(t, err, "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: [spec.validations[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^, spec.validations[1].expression: Invalid value: \"object.metadata.name\": must evaluate to bool but got dyn]",
		"spec.validations[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^",
		`spec.validations[1].expression: Invalid value: "object.metadata.name": must evaluate to bool but got dyn`)
	_, err = vapbs.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		ParamRef: &admissionv1.ParamRef{Name: "x"}, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny, admissionv1.Warn}}}, metav1.CreateOptions{})
	expectInvalid(t, err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "bad" is invalid: [spec.paramRef.parameterNotFoundAction: Required value, spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose), spec.policyName: Required value]`,
		"spec.paramRef.parameterNotFoundAction: Required value",
		`spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)`,
		"spec.policyName: Required value")
	_, err = maps.Create(ctx, &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: admissionv1.MutatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: configMapRules[0].Rule}}}},
		Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeJSONPatch},
			{PatchType: admissionv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: "1"}}},
	}}, metav1.CreateOptions{})
	expectInvalid(t, err, `MutatingAdmissionPolicy.admissionregistration.k8s.io "bad" is invalid: [spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE", spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch, spec.mutations[1].applyConfiguration.expression: Invalid value: "1": must evaluate to Object but got int, spec.reinvocationPolicy: Required value]`,
		`spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`,
		"spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
		`spec.mutations[1].applyConfiguration.expression: Invalid value: "1": must evaluate to Object but got int`,
		"spec.reinvocationPolicy: Required value")
	_, err = mapbs.Create(ctx, &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{
		ParamRef: &admissionv1.ParamRef{Name: "x", Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: kptr.To(admissionv1.ParameterNotFoundActionType("Skip"))}}}, metav1.CreateOptions{})
	expectInvalid(t, err, `MutatingAdmissionPolicyBinding.admissionregistration.k8s.io "bad" is invalid: [spec.policyName: Required value, spec.paramRef.name: Forbidden: name and selector are mutually exclusive, spec.paramRef.selector: Forbidden: name and selector are mutually exclusive, spec.paramRef.parameterNotFoundAction: Unsupported value: "Skip": supported values: "Deny", "Allow"]`,
		"spec.policyName: Required value", "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
		"spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
		`spec.paramRef.parameterNotFoundAction: Unsupported value: "Skip": supported values: "Deny", "Allow"`)

	// Discovery: cluster-scoped, in the category api-extensions, the
	// status of validating policies only.
	list, err := e.kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
		if r.Namespaced || (!strings.Contains(r.Name, "/") && (len(r.Categories) != 1 || r.Categories[0] != "api-extensions")) {
			t.Errorf("discovery: %+v", r)
		}
	}
	want := "mutatingadmissionpolicies mutatingadmissionpolicybindings mutatingwebhookconfigurations validatingadmissionpolicies validatingadmissionpolicies/status validatingadmissionpolicybindings validatingwebhookconfigurations"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("discovery: %s", got)
	}

	if err := vaps.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vaps.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestAdmissionPolicyParamAuthorization: who writes a policy with a
// paramKind must be able to get every object of that kind, who writes a
// binding with a paramRef the objects it names, as in Kubernetes.
func TestAdmissionPolicyParamAuthorization(t *testing.T) {
	e := start(t)
	ctx := e.ctx
	rbac := e.kube.RbacV1()
	grant := func(name string, rule rbacv1.PolicyRule) {
		t.Helper()
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("admission-writer", rbacv1.PolicyRule{APIGroups: []string{admissionv1.GroupName}, Resources: []string{"*"}, Verbs: []string{"*"}})
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	alice := kubernetes.NewForConfigOrDie(cfg).AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind:        &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: configMapRules},
		Validations:      []admissionv1.Validation{{Expression: "true"}},
	}}
	var err error
	waitAllowed(t, func() error {
		_, err = alice.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
	const who = "&{alice  [system:authenticated] map[]}"
	expectInvalid(t, err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: spec.paramKind: Forbidden: user `+who+` must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)`,
		`spec.paramKind: Forbidden: user `+who+` must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)`)
	if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "p", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		ParamRef: &admissionv1.ParamRef{Name: "params", Namespace: "default", ParameterNotFoundAction: kptr.To(admissionv1.DenyAction)}}}
	_, err = alice.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
	expectInvalid(t, err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "b" is invalid: spec.paramRef: Forbidden: user `+who+` does not have "get" permission on the object referenced by paramRef`,
		`spec.paramRef: Forbidden: user `+who+` does not have "get" permission on the object referenced by paramRef`)

	grant("configmap-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	policy.Name = "q"
	waitAllowed(t, func() error {
		_, err := alice.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
		return err
	})
	if _, err := alice.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A selector needs list.
	binding.Name, binding.Spec.ParamRef = "c", &admissionv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: kptr.To(admissionv1.AllowAction)}
	_, err = alice.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
	expectInvalid(t, err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "c" is invalid: spec.paramRef: Forbidden: user `+who+` does not have "list" permission on the object referenced by paramRef`,
		`spec.paramRef: Forbidden: user `+who+` does not have "list" permission on the object referenced by paramRef`)
}
