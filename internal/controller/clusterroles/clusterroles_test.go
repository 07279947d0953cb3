package clusterroles

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	if err := bootstrap(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, a := range dyn.Actions() {
		switch a.GetVerb() {
		case "create":
			creates++
		case "list":
		default:
			t.Errorf("bootstrap on an empty store: %v (want a list of each resource, then creates)", a)
		}
	}
	if want := len(rbac.DefaultClusterRoles()) + len(rbac.DefaultClusterRoleBindings()); creates != want {
		t.Fatalf("%d creates, want %d", creates, want)
	}
	// A second start finds everything in place: no write.
	dyn.ClearActions()
	if err := bootstrap(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "list" {
			t.Fatalf("second bootstrap wrote: %v", a)
		}
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
