package rbac

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func set(t *testing.T, s *Store, kind string, obj any) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(kind, raw, false); err != nil {
		t.Fatal(err)
	}
}

func res(u user.Info, verb, ns, group, resource, sub, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: ns, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
}

func TestRuleAllows(t *testing.T) {
	u := &user.DefaultInfo{Name: "u"}
	cases := []struct {
		rule rbacv1.PolicyRule
		a    authorizer.AttributesRecord
		want bool
	}{
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}}, res(u, "get", "ns", "g", "r", "", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}}, res(u, "list", "ns", "g", "r", "", ""), false},
		{rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, res(u, "delete", "", "any", "thing", "status", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}}, res(u, "get", "ns", "g", "r", "status", "x"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r/status"}}, res(u, "get", "ns", "g", "r", "status", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"*/scale"}}, res(u, "get", "ns", "g", "r", "scale", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}, ResourceNames: []string{"a"}}, res(u, "get", "ns", "g", "r", "", "b"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}, ResourceNames: []string{"a"}}, res(u, "get", "ns", "g", "r", "", "a"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"r"}}, res(u, "get", "ns", "g", "r", "", "a"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, authorizer.AttributesRecord{User: u, Verb: "get", Path: "/apis/g/v1"}, true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, authorizer.AttributesRecord{User: u, Verb: "get", Path: "/healthz/etcd"}, false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, authorizer.AttributesRecord{User: u, Verb: "get", Path: "/metrics"}, false},
	}
	for i, c := range cases {
		if got := RuleAllows(c.a, &c.rule); got != c.want {
			t.Errorf("case %d: %+v on %+v = %v", i, c.rule, c.a, got)
		}
	}
}

func TestAuthorize(t *testing.T) {
	s := NewStore()
	set(t, s, KindClusterRole, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"g"}, Resources: []string{"r"}}}})
	set(t, s, KindRole, rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: "a"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{"g"}, Resources: []string{"r"}}}})
	set(t, s, KindRoleBinding, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-reads", Namespace: "a"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"}, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "jane"}}})
	set(t, s, KindRoleBinding, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "devs-write", Namespace: "a"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"}, Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "devs"}, {Kind: "ServiceAccount", Name: "bot"}}})
	set(t, s, KindClusterRoleBinding, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "missing"}, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "jane"}}})
	jane := &user.DefaultInfo{Name: "jane", Groups: []string{"devs"}}
	bot := &user.DefaultInfo{Name: ServiceAccountUsername("a", "bot")}
	ctx := context.Background()
	check := func(a authorizer.AttributesRecord, want authorizer.Decision) string {
		t.Helper()
		d, reason, err := s.Authorize(ctx, a)
		if err != nil || d != want {
			t.Errorf("%+v: %v %q %v, want %v", a, d, reason, err, want)
		}
		return reason
	}
	check(res(jane, "list", "a", "g", "r", "", ""), authorizer.DecisionAllow)
	check(res(jane, "create", "a", "g", "r", "", ""), authorizer.DecisionAllow)
	check(res(bot, "create", "a", "g", "r", "", ""), authorizer.DecisionAllow)
	check(res(bot, "get", "a", "g", "r", "", "x"), authorizer.DecisionNoOpinion)
	reason := check(res(jane, "list", "b", "g", "r", "", ""), authorizer.DecisionNoOpinion)
	if reason != `RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found` {
		t.Errorf("reason %q", reason)
	}
	rules, errs := s.RulesFor(jane, "a")
	if len(rules) != 2 || len(errs) != 1 {
		t.Errorf("rules %v errs %v", rules, errs)
	}
	// Deleting a binding takes its rights away.
	raw, _ := json.Marshal(rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-reads", Namespace: "a"}})
	if err := s.Set(KindRoleBinding, raw, true); err != nil {
		t.Fatal(err)
	}
	check(res(jane, "list", "a", "g", "r", "", ""), authorizer.DecisionNoOpinion)
}

func TestConfirmNoEscalation(t *testing.T) {
	s := NewStore()
	set(t, s, KindClusterRole, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"g"}, Resources: []string{"r"}}}})
	set(t, s, KindClusterRoleBinding, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"}, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "jane"}}})
	jane := &user.DefaultInfo{Name: "jane", Groups: []string{"system:authenticated"}}
	if err := s.ConfirmNoEscalation(jane, "a", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"r"}}}); err != nil {
		t.Fatal(err)
	}
	err := s.ConfirmNoEscalation(jane, "a", []rbacv1.PolicyRule{{Verbs: []string{"get", "delete", "create"}, APIGroups: []string{"g"}, Resources: []string{"r", "q"}}})
	want := "user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
		"{APIGroups:[\"g\"], Resources:[\"q\"], Verbs:[\"get\" \"delete\" \"create\"]}\n" +
		"{APIGroups:[\"g\"], Resources:[\"r\"], Verbs:[\"delete\" \"create\"]}"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestAggregatedRules(t *testing.T) {
	roles := DefaultClusterRoles()
	var all []*rbacv1.ClusterRole
	for i := range roles {
		all = append(all, &roles[i])
	}
	extra := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "crontab-view", Labels: map[string]string{AggregateToView: "true"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"stable.example.com"}, Resources: []string{"crontabs"}}}}
	all = append(all, extra)
	byName := map[string]*rbacv1.ClusterRole{}
	for _, r := range all {
		byName[r.Name] = r
	}
	// Views aggregate into edit and admin through the role labels; settle
	// in a few rounds as the controller does.
	for round := 0; round < 3; round++ {
		for _, r := range all {
			if rules, ok := AggregatedRules(r, all); ok {
				r.Rules = rules
			}
		}
	}
	for _, name := range []string{"view", "edit", "admin"} {
		found := false
		for _, r := range byName[name].Rules {
			if len(r.APIGroups) == 1 && r.APIGroups[0] == "stable.example.com" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s does not include the crontab rule: %v", name, byName[name].Rules)
		}
	}
	if strings.Contains(compactString(byName["view"].Rules[0]), "rolebindings") {
		t.Error("view includes admin rules")
	}
	for _, r := range byName["view"].Rules {
		for _, res := range r.Resources {
			if res == "roles" {
				t.Error("view includes roles")
			}
		}
	}
}

func TestReconcile(t *testing.T) {
	want := DefaultClusterRoles()[0] // cluster-admin
	have := want.DeepCopy()
	have.Rules = have.Rules[:1]
	have.Rules = append(have.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/extra"}})
	out, changed := ReconcileClusterRole(have, want)
	if !changed || len(out.Rules) != 3 {
		t.Fatalf("changed %v rules %v", changed, out.Rules)
	}
	if _, changed := ReconcileClusterRole(out, want); changed {
		t.Fatal("reconciled twice")
	}
	frozen := have.DeepCopy()
	frozen.Annotations[AutoUpdateAnnotation] = "false"
	if _, changed := ReconcileClusterRole(frozen, want); changed {
		t.Fatal("autoupdate=false reconciled")
	}
	b := DefaultClusterRoleBindings()[3]
	hb := b.DeepCopy()
	hb.Subjects = hb.Subjects[:1]
	ob, changed := ReconcileClusterRoleBinding(hb, b)
	if !changed || len(ob.Subjects) != 2 {
		t.Fatalf("binding: %v %v", changed, ob.Subjects)
	}
}

// TestDefaultsInPlace: readiness waits for every default object, and for
// the aggregated roles' rules; once seen, it stays (kube's post-start hook
// runs once).
func TestDefaultsInPlace(t *testing.T) {
	s := NewStore()
	if s.DefaultsInPlace() {
		t.Fatal("an empty store has the defaults")
	}
	for _, r := range DefaultClusterRoles() {
		if r.AggregationRule != nil {
			r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
		}
		set(t, s, KindClusterRole, r)
	}
	for _, b := range DefaultClusterRoleBindings() {
		set(t, s, KindClusterRoleBinding, b)
	}
	for _, r := range DefaultRoles() {
		set(t, s, KindRole, r)
	}
	bindings := DefaultRoleBindings()
	for _, b := range bindings[1:] {
		set(t, s, KindRoleBinding, b)
	}
	if s.DefaultsInPlace() {
		t.Fatalf("in place without the role binding %s/%s", bindings[0].Namespace, bindings[0].Name)
	}
	// An aggregated role not aggregated yet is not in place.
	admin := DefaultClusterRoles()[1]
	if admin.AggregationRule == nil {
		t.Fatalf("%s is not aggregated", admin.Name)
	}
	set(t, s, KindClusterRole, admin)
	set(t, s, KindRoleBinding, bindings[0])
	if s.DefaultsInPlace() {
		t.Fatalf("in place while %s has no rules", admin.Name)
	}
	admin.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
	set(t, s, KindClusterRole, admin)
	if !s.DefaultsInPlace() {
		t.Fatal("not in place with every default")
	}
	raw, _ := json.Marshal(admin)
	if err := s.Set(KindClusterRole, raw, true); err != nil {
		t.Fatal(err)
	}
	if !s.DefaultsInPlace() {
		t.Fatal("no longer in place after a default was deleted")
	}
}

// TestSameRule: sameRule is apiequality.Semantic.DeepEqual on rules, the
// oracle, over every field a rule has.
func TestSameRule(t *testing.T) {
	if n := reflect.TypeFor[rbacv1.PolicyRule]().NumField(); n != 5 {
		t.Fatalf("PolicyRule has %d fields; sameRule compares 5", n)
	}
	base := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}, NonResourceURLs: []string{"/x"}}
	variants := []rbacv1.PolicyRule{
		base,
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"pods"}, ResourceNames: []string{"a"}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods", "x"}, ResourceNames: []string{"a"}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{}, NonResourceURLs: []string{"/x"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, NonResourceURLs: []string{}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{},
		{Verbs: []string{}},
	}
	for i, a := range variants {
		for j, b := range variants {
			if got, want := sameRule(a, b), apiequality.Semantic.DeepEqual(a, b); got != want {
				t.Errorf("%d, %d: %v, Semantic.DeepEqual %v", i, j, got, want)
			}
		}
	}
}
