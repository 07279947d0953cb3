package clusterroles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/store"
)

func fakeClient() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rbacv1.SchemeGroupVersion.WithResource("clusterroles"):        "ClusterRoleList",
		rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"): "ClusterRoleBindingList",
	})
}

func TestBootstrapCreatesTheDefaultPolicyOnce(t *testing.T) {
	dyn := fakeClient()
	both := func(ctx context.Context, dyn dynamic.Interface) error {
		return errors.Join(bootstrap(ctx, dyn), bootstrapRoles(ctx, dyn))
	}
	if err := both(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, a := range dyn.Actions() {
		switch a.GetVerb() {
		case "create":
			creates++
		case "list", "get":
		default:
			t.Errorf("bootstrap on an empty store: %v (want reads, then creates)", a)
		}
	}
	if want := len(rbac.DefaultClusterRoles()) + len(rbac.DefaultClusterRoleBindings()) + len(rbac.DefaultRoles()) + len(rbac.DefaultRoleBindings()); creates != want {
		t.Fatalf("%d creates, want %d", creates, want)
	}
	// A second start finds everything in place: no write.
	dyn.ClearActions()
	if err := both(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "get" {
			t.Fatalf("second bootstrap wrote: %v", a)
		}
	}
	// The reader of the authentication ConfigMap, as Kubernetes has it.
	role, err := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("roles")).Namespace("kube-system").Get(context.Background(), "extension-apiserver-authentication-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rules := fmt.Sprint(role.Object["rules"]); rules != "[map[apiGroups:[] resourceNames:[extension-apiserver-authentication] resources:[configmaps] verbs:[get list watch]]]" {
		t.Fatalf("reader role: %s", rules)
	}
}

// TestBootstrapRestoresChangedRoles: a stored default role that lost a
// rule gets it back (an update), as kube-apiserver's reconciliation does.
func TestBootstrapRestoresChangedRoles(t *testing.T) {
	dyn := fakeClient()
	ctx := context.Background()
	if err := bootstrap(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	roles := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	u, err := roles.Get(ctx, "system:discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["rules"] = []any{}
	if _, err := roles.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn.ClearActions()
	if err := bootstrap(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	var updated []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" {
			updated = append(updated, a.(clienttesting.UpdateAction).GetObject().(metav1.Object).GetName())
		}
	}
	if len(updated) != 1 || updated[0] != "system:discovery" {
		t.Fatalf("updated %v, want system:discovery", updated)
	}
	u, err = roles.Get(ctx, "system:discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rules, _, _ := unstructured.NestedSlice(u.Object, "rules"); len(rules) == 0 {
		t.Error("the rules were not restored")
	}
}

func TestAggregateGathersSelectedRules(t *testing.T) {
	dyn := fakeClient()
	c := NewAggregator(store.NewFixedCache("/registry/clusterroles/", 1), dyn, slog.New(slog.DiscardHandler))
	c.roles["view"] = &rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{Name: "view", ResourceVersion: "3"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}},
	}
	c.roles["widgets-view"] = &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}},
	}
	c.aggregate(context.Background())
	var patches []string
	for _, a := range dyn.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patches = append(patches, p.GetName()+" "+string(p.GetPatch()))
		}
	}
	if len(patches) != 1 || !strings.HasPrefix(patches[0], "view ") || !strings.Contains(patches[0], `"resources":["widgets"]`) || !strings.Contains(patches[0], `"resourceVersion":"3"`) {
		t.Fatalf("patches: %v", patches)
	}
}

// TestAggregateChainsOnce: admin aggregates edit, which aggregates view,
// which aggregates a CRD's role; one pass writes each of the three once,
// with its final rules, as the passes of a write each would end.
func TestAggregateChainsOnce(t *testing.T) {
	dyn := fakeClient()
	c := NewAggregator(store.NewFixedCache("/registry/clusterroles/", 1), dyn, slog.New(slog.DiscardHandler))
	to := func(role string) map[string]string {
		return map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + role: "true"}
	}
	aggregates := func(role string) *rbacv1.AggregationRule {
		return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: to(role)}}}
	}
	c.roles["admin"] = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin", ResourceVersion: "1"}, AggregationRule: aggregates("admin")}
	c.roles["edit"] = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "edit", ResourceVersion: "2", Labels: to("admin")}, AggregationRule: aggregates("edit")}
	c.roles["view"] = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", ResourceVersion: "3", Labels: to("edit")}, AggregationRule: aggregates("view")}
	c.roles["widgets-view"] = &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: to("view")},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}},
	}
	c.roles["widgets-edit"] = &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-edit", Labels: to("edit")},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"update"}}},
	}
	c.aggregate(context.Background())
	patches := map[string]string{}
	for _, a := range dyn.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			if _, twice := patches[p.GetName()]; twice {
				t.Errorf("%s written twice", p.GetName())
			}
			patches[p.GetName()] = string(p.GetPatch())
		}
	}
	for role, verbs := range map[string][]string{"view": {`"get"`}, "edit": {`"get"`, `"update"`}, "admin": {`"get"`, `"update"`}} {
		p, ok := patches[role]
		if !ok {
			t.Errorf("%s not written; patches: %v", role, patches)
			continue
		}
		for _, v := range verbs {
			if !strings.Contains(p, v) {
				t.Errorf("%s lacks %s: %s", role, v, p)
			}
		}
	}
	if len(patches) != 3 {
		t.Errorf("patches: %v", patches)
	}
	// What the controller holds was not changed by the settling: the next
	// event's pass compares against the stored roles.
	if len(c.roles["admin"].Rules) != 0 {
		t.Errorf("the cached admin role was changed: %v", c.roles["admin"].Rules)
	}
}

// TestBootstrapCreatesAggregatedRoles: a new store's admin, edit and view
// are created with the rules aggregation gives them (admin has view's
// too), and the aggregation controller, given what was created, finds
// nothing to write.
func TestBootstrapCreatesAggregatedRoles(t *testing.T) {
	dyn := fakeClient()
	ctx := context.Background()
	if err := bootstrap(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewAggregator(store.NewFixedCache("/registry/clusterroles/", 1), dyn, slog.New(slog.DiscardHandler))
	for _, u := range list.Items {
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
			t.Fatal(err)
		}
		c.roles[role.Name] = role
	}
	viewsPods := func(role string) bool {
		for _, r := range c.roles[role].Rules {
			if strings.Join(r.APIGroups, ",") == "" && strings.Contains(","+strings.Join(r.Resources, ",")+",", ",pods,") && strings.Contains(strings.Join(r.Verbs, ","), "get") {
				return true
			}
		}
		return false
	}
	for _, role := range []string{"view", "edit", "admin"} {
		if c.roles[role] == nil || c.roles[role].AggregationRule == nil {
			t.Fatalf("%s: not created with its aggregationRule", role)
		}
		if !viewsPods(role) {
			t.Errorf("%s was created without view's rule on pods: %v", role, c.roles[role].Rules)
		}
	}
	if len(c.roles["admin"].Rules) <= len(c.roles["edit"].Rules) || len(c.roles["edit"].Rules) <= len(c.roles["view"].Rules) {
		t.Errorf("rules: admin %d, edit %d, view %d; want each more than the next", len(c.roles["admin"].Rules), len(c.roles["edit"].Rules), len(c.roles["view"].Rules))
	}
	dyn.ClearActions()
	c.aggregate(ctx)
	for _, a := range dyn.Actions() {
		t.Errorf("aggregation after bootstrap wrote: %v", a)
	}
}

// TestBootstrapAggregatesStoredRoles: a role stored before the defaults
// (a CRD's aggregate-to-view role) is in the rules view and admin are
// created with.
func TestBootstrapAggregatesStoredRoles(t *testing.T) {
	dyn := fakeClient()
	ctx := context.Background()
	roles := dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	widgets := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: rbac.KindClusterRole},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(widgets)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roles.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bootstrap(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"view", "edit", "admin"} {
		u, err := roles.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rules := fmt.Sprint(u.Object["rules"]); !strings.Contains(rules, "resources:[widgets]") {
			t.Errorf("%s was created without the stored role's rule: %s", name, rules)
		}
	}
}
