package integration

import (
	"crypto/tls"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/crdserver/crdserver/server"
)

// rbacEnv is a server with a token file and the CronTab CRD.
func rbacEnv(t *testing.T) (*env, func(token string) *client) {
	e := start(t, func(c *server.Config) { c.TokenAuthFile = writeTokens(t) })
	e.createCRD(cronTabCRD(t))
	as := func(token string) *client {
		c := newClient(t, e.srv, tls.Certificate{})
		c.token = token
		return c
	}
	return e, as
}

func (e *env) mustCreate(path, body string) {
	e.t.Helper()
	if r := e.do("POST", path, body); r.code != 201 {
		e.t.Fatalf("POST %s: %d %s", path, r.code, r.body)
	}
}

// eventuallyCode polls a request until it answers code (RBAC follows its
// watch caches, so a new binding counts a moment after it is stored).
func eventuallyCode(t *testing.T, c *client, method, path, body string, code int) response {
	t.Helper()
	var last response
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = c.do(method, path, body)
		return last.code == code, nil
	})
	if err != nil {
		t.Fatalf("%s %s: %d %s, want %d", method, path, last.code, last.body, code)
	}
	return last
}

func TestRBACDefaults(t *testing.T) {
	e, as := rbacEnv(t)
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user", "system:public-info-viewer"} {
		if r := e.do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/"+name, ""); r.code != 200 {
			t.Errorf("clusterrole %s: %d %s", name, r.code, r.body)
		}
	}
	r := e.do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin", "")
	var crb rbacv1.ClusterRoleBinding
	if err := json.Unmarshal(r.body, &crb); err != nil || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "system:masters" || crb.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" {
		t.Fatalf("cluster-admin binding: %v %s", err, r.body)
	}
	// Everyone may read health and version; the authenticated, discovery.
	anon := newClient(t, e.srv, tls.Certificate{})
	for _, p := range []string{"/readyz", "/livez", "/healthz", "/version"} {
		if r := anon.do("GET", p, ""); r.code != 200 {
			t.Errorf("anonymous %s: %d", p, r.code)
		}
	}
	expectStatus(t, anon.do("GET", "/readyz/etcd", ""), 403, metav1.StatusReasonForbidden, `User "system:anonymous" cannot get path "/readyz/etcd"`)
	jane := as("jane-token")
	for _, p := range []string{"/api", "/apis", "/apis/stable.example.com/v1", "/openapi/v2", "/openapi/v3"} {
		if r := jane.do("GET", p, ""); r.code != 200 {
			t.Errorf("jane %s: %d %s", p, r.code, r.body)
		}
	}
	expectStatus(t, jane.do("GET", "/metrics", ""), 403, metav1.StatusReasonForbidden, `User "jane" cannot get path "/metrics"`)
	// Roles cannot be written badly.
	expectStatus(t, e.do("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"bad"},"rules":[{"apiGroups":[""],"resources":["pods"]},{"nonResourceURLs":["/x"],"verbs":["get"]}]}`),
		422, metav1.StatusReasonInvalid, `rules[0].verbs: Required value: verbs must contain at least one value`)
	expectStatus(t, e.do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"bad"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"x"},"subjects":[{"kind":"Robot","name":"r"}]}`),
		422, metav1.StatusReasonInvalid, `roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`)
}

func TestRBACGrantsAndAggregation(t *testing.T) {
	e, as := rbacEnv(t)
	jane := as("jane-token")
	e.mustCreate(ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c1"}}`)
	expectStatus(t, jane.do("GET", ctPath, ""), 403, metav1.StatusReasonForbidden, `User "jane" cannot list resource "crontabs"`)

	// view in default: not yet for CronTabs...
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-view"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	eventuallyCode(t, jane, "GET", "/api/v1/namespaces/default", "", 200)
	expectStatus(t, jane.do("GET", ctPath, ""), 403, metav1.StatusReasonForbidden, `User "jane" cannot list resource "crontabs"`)
	// ...until a role for them is aggregated into view.
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/clusterroles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"crontab-reader","labels":{"rbac.authorization.k8s.io/aggregate-to-view":"true"}},"rules":[{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get","list","watch"]}]}`)
	eventuallyCode(t, jane, "GET", ctPath, "", 200)
	// admin aggregates edit, which aggregates view: it follows a moment later.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventually(t, ctx, "admin aggregates the view rule", func() (bool, error) {
		r := e.do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", "")
		return strings.Contains(string(r.body), "stable.example.com"), nil
	})
	// Only in default, and only reading.
	expectStatus(t, jane.do("GET", "/apis/stable.example.com/v1/namespaces/kube-public/crontabs", ""), 403, metav1.StatusReasonForbidden,
		`crontabs.stable.example.com is forbidden: User "jane" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "kube-public"`)
	expectStatus(t, jane.do("POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c2"}}`), 403, metav1.StatusReasonForbidden,
		`User "jane" cannot create resource "crontabs"`)
	// Removing the binding takes it away again.
	if r := e.do("DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/jane-view", ""); r.code != 200 {
		t.Fatalf("delete binding: %d %s", r.code, r.body)
	}
	eventuallyCode(t, jane, "GET", ctPath, "", 403)
}

func TestRBACEscalation(t *testing.T) {
	e, as := rbacEnv(t)
	jane := as("jane-token")
	// jane manages roles and bindings in default and reads CronTabs.
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"manager"},"rules":[`+
			`{"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles","rolebindings"],"verbs":["create","get","list","update","patch","delete"]},`+
			`{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get","list"]}]}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-manager"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"manager"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	rolesPath := "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"
	// What she holds she may grant.
	eventuallyCode(t, jane, "POST", rolesPath,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"reader"},"rules":[{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get"]}]}`, 201)
	// More she may not.
	st := expectStatus(t, jane.do("POST", rolesPath,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"deleter"},"rules":[{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get","delete"]}]}`),
		403, metav1.StatusReasonForbidden, `roles.rbac.authorization.k8s.io "deleter" is forbidden: user "jane" (groups=["devs" "qa" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`+"\n"+`{APIGroups:["stable.example.com"], Resources:["crontabs"], Verbs:["delete"]}`)
	_ = st
	bindingsPath := "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings"
	adminBinding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-admin"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"admin"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"bob"}]}`
	expectStatus(t, jane.do("POST", bindingsPath, adminBinding), 403, metav1.StatusReasonForbidden,
		`rolebindings.rbac.authorization.k8s.io "bob-admin" is forbidden: user "jane" (groups=["devs" "qa" "system:authenticated"]) is attempting to grant RBAC permissions not currently held`)
	// With the bind verb on that role she may.
	e.mustCreate(rolesPath, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"binder"},"rules":[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles"],"resourceNames":["admin"],"verbs":["bind"]}]}`)
	e.mustCreate(bindingsPath, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-binder"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"binder"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"devs"}]}`)
	eventuallyCode(t, jane, "POST", bindingsPath, adminBinding, 201)
	// And with escalate on roles, any role.
	e.mustCreate(rolesPath, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"escalator"},"rules":[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"],"verbs":["escalate"]}]}`)
	e.mustCreate(bindingsPath, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-escalator"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"escalator"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	eventuallyCode(t, jane, "POST", rolesPath,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"deleter"},"rules":[{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get","delete"]}]}`, 201)
}

func TestAccessReviews(t *testing.T) {
	e, as := rbacEnv(t)
	jane := as("jane-token")
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-view"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	ssar := func(verb, ns string) authorizationv1.SelfSubjectAccessReview {
		t.Helper()
		r := eventuallyCode(t, jane, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"`+verb+`","resource":"namespaces","namespace":"`+ns+`","name":"`+ns+`"}}}`, 201)
		var out authorizationv1.SelfSubjectAccessReview
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ssar("get", "default").Status.Allowed, nil
	}); err != nil {
		t.Fatal("get namespace default not allowed")
	}
	if got := ssar("delete", "default"); got.Status.Allowed || got.Kind != "SelfSubjectAccessReview" || got.Spec.ResourceAttributes.Verb != "delete" {
		t.Fatalf("delete: %+v", got)
	}
	if ssar("get", "kube-system").Status.Allowed {
		t.Fatal("get kube-system allowed")
	}
	expectStatus(t, jane.do("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{}}`),
		422, metav1.StatusReasonInvalid, "spec.resourceAttributes: Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified")
	// The rules she has in default.
	r := jane.do("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"default"}}`)
	var rules authorizationv1.SelfSubjectRulesReview
	if err := json.Unmarshal(r.body, &rules); err != nil || r.code != 201 || len(rules.Status.ResourceRules) == 0 || len(rules.Status.NonResourceRules) == 0 {
		t.Fatalf("rules review: %d %s", r.code, r.body)
	}
	// Who am I.
	r = jane.do("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	if r.code != 201 || !strings.Contains(string(r.body), `"username":"jane"`) || !strings.Contains(string(r.body), `"uid":"1001"`) {
		t.Fatalf("selfsubjectreview: %d %s", r.code, r.body)
	}
	// Reviews of others need the admin's rights.
	sar := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"jane","resourceAttributes":{"verb":"list","resource":"namespaces"}}}`
	expectStatus(t, jane.do("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar), 403, metav1.StatusReasonForbidden, `cannot create resource "subjectaccessreviews"`)
	r = e.do("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
	if r.code != 201 || !strings.Contains(string(r.body), `"allowed":false`) {
		t.Fatalf("subjectaccessreview: %d %s", r.code, r.body)
	}
	// Anonymous requests may not ask.
	expectStatus(t, newClient(t, e.srv, tls.Certificate{}).do("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "{}"), 403, metav1.StatusReasonForbidden, `User "system:anonymous" cannot create resource "selfsubjectaccessreviews"`)
	// GET is not a verb of a review.
	if r := e.do("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ""); r.code != 405 {
		t.Fatalf("GET review: %d %s", r.code, r.body)
	}
}

func TestRBACImpersonation(t *testing.T) {
	e, as := rbacEnv(t)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/clusterroles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"impersonate-bob"},"rules":[{"apiGroups":[""],"resources":["users"],"resourceNames":["bob"],"verbs":["impersonate"]}]}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"jane-impersonates-bob"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"impersonate-bob"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	jane := as("jane-token")
	jane.hdr = []string{"Impersonate-User", "bob"}
	// As bob, who may do nothing but discovery. Discovery answers 200
	// once the authorizer sees the role and binding: before, jane's
	// impersonation is refused with a 403 too.
	eventuallyCode(t, jane, "GET", "/apis", "", 200)
	r := jane.do("GET", ctPath, "")
	if r.code != 403 || !strings.Contains(string(r.body), `User \"bob\" cannot list resource \"crontabs\"`) {
		t.Fatalf("as bob: %d %s", r.code, r.body)
	}
	jane.hdr = []string{"Impersonate-User", "carol"}
	expectStatus(t, jane.do("GET", "/apis", ""), 403, metav1.StatusReasonForbidden, `users "carol" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope`)
}

func TestRBACSubresources(t *testing.T) {
	e := start(t, func(c *server.Config) { c.TokenAuthFile = writeTokens(t) })
	crd := cronTabCRD(t)
	crd.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	e.createCRD(crd)
	as := func(token string) *client {
		c := newClient(t, e.srv, tls.Certificate{})
		c.token = token
		return c
	}
	e.mustCreate(ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c1"}}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"reader"},"rules":[{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get"]}]}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-reader"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	jane := as("jane-token")
	eventuallyCode(t, jane, "GET", ctPath+"/c1", "", 200)
	// The object, not its subresources.
	expectStatus(t, jane.do("GET", ctPath+"/c1/status", ""), 403, metav1.StatusReasonForbidden,
		`crontabs.stable.example.com "c1" is forbidden: User "jane" cannot get resource "crontabs/status" in API group "stable.example.com" in the namespace "default"`)
	// A rule for */status covers every resource's status.
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"status-reader"},"rules":[{"apiGroups":["*"],"resources":["*/status"],"verbs":["get"]}]}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"jane-status"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"status-reader"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`)
	eventuallyCode(t, jane, "GET", ctPath+"/c1/status", "", 200)
	expectStatus(t, jane.do("PUT", ctPath+"/c1/status", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c1"}}`), 403, metav1.StatusReasonForbidden,
		`cannot update resource "crontabs/status"`)
}
