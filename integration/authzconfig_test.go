package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/server"
)

// sarWebhook is a SubjectAccessReview webhook on 127.0.0.1 over TLS. It
// allows web-alice, denies web-mallory any resource, has no opinion about web-carol
// (with a reason) and about everyone else (without), and counts the
// reviews it is sent per user.
type sarWebhook struct {
	srv        *httptest.Server
	kubeconfig string
	mu         sync.Mutex
	calls      map[string]int
}

func newSARWebhook(t *testing.T) *sarWebhook {
	t.Helper()
	w := &sarWebhook{calls: map[string]int{}}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct {
			APIVersion string `json:"apiVersion"`
			Spec       struct {
				User               string          `json:"user"`
				ResourceAttributes json.RawMessage `json:"resourceAttributes"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.calls[in.Spec.User]++
		w.mu.Unlock()
		status := map[string]any{"allowed": false}
		switch in.Spec.User {
		case "web-alice":
			status = map[string]any{"allowed": true, "reason": "alice may do anything"}
		case "web-mallory":
			// Denied resources, not discovery (as kubectl needs it).
			if in.Spec.ResourceAttributes == nil {
				break
			}
			status = map[string]any{"allowed": false, "denied": true, "reason": "mallory is banned"}
		case "web-carol":
			status = map[string]any{"allowed": false, "reason": "not known to the webhook"}
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": in.APIVersion, "kind": "SubjectAccessReview", "status": status})
	}))
	t.Cleanup(w.srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	w.kubeconfig = writeWebhookKubeconfig(t, w.srv.URL+"/authorize", ca)
	return w
}

func (w *sarWebhook) count(user string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[user]
}

// writeWebhookKubeconfig writes the kubeconfig of a webhook at url.
func writeWebhookKubeconfig(t *testing.T, url string, ca []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: apiserver
contexts:
- name: webhook
  context: {cluster: webhook, user: apiserver}
current-context: webhook
`, url, b64(ca))
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// downWebhookKubeconfig is the kubeconfig of a webhook whose port
// refuses connections.
func downWebhookKubeconfig(t *testing.T) (string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	w := newSARWebhook(t)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	return writeWebhookKubeconfig(t, "https://"+addr+"/authorize", ca), addr
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// webhookAuthorizer is an authorizers entry of type Webhook.
func webhookAuthorizer(name, kubeconfig, failurePolicy string, extra ...string) string {
	s := fmt.Sprintf(`- type: Webhook
  name: %s
  webhook:
    timeout: 3s
    authorizedTTL: 1m
    unauthorizedTTL: 1m
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: %s
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: %s
`, name, failurePolicy, kubeconfig)
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

const rbacAuthorizer = "- type: RBAC\n  name: rbac\n"

func authzConfig(authorizers ...string) string {
	return "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n" + strings.Join(authorizers, "")
}

func writeAuthzFile(t *testing.T, path, content string) {
	t.Helper()
	// Written to a new file renamed over the old one, so the server
	// never reads it half written.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startAuthz starts a server whose authorization is configured by cfg
// (a file written for it when it is an AuthorizationConfiguration).
func startAuthz(t *testing.T, o server.AuthorizationOptions) *env {
	t.Helper()
	o.WebhookRetryBackoff = &wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1}
	return start(t, func(c *server.Config) { c.Authorization = o })
}

// as is a client of the server as user (impersonated by the admin).
func (e *env) as(user string) kubernetes.Interface {
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return kubernetes.NewForConfigOrDie(cfg)
}

// listConfigMaps lists the default namespace's ConfigMaps as user and
// returns the error (nil when allowed).
func (e *env) listConfigMaps(user string) error {
	_, err := e.as(user).CoreV1().ConfigMaps("default").List(e.ctx, metav1.ListOptions{})
	return err
}

// forbidden checks that err is kube-apiserver's 403 with message.
func forbidden(t *testing.T, err error, message string) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusForbidden || se.ErrStatus.Reason != metav1.StatusReasonForbidden {
		t.Fatalf("got %v, want a Forbidden Status", err)
	}
	if se.ErrStatus.Message != message {
		t.Fatalf("message\n got %q\nwant %q", se.ErrStatus.Message, message)
	}
}

// cmForbidden is the message of a ConfigMap list refused to user.
func cmForbidden(user, reason string) string {
	m := fmt.Sprintf(`configmaps is forbidden: User %q cannot list resource "configmaps" in API group "" in the namespace "default"`, user)
	if reason != "" {
		m += ": " + reason
	}
	return m
}

func (e *env) bindView(user string) {
	e.t.Helper()
	_, err := e.kube.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	// RBAC follows its cache: wait until the binding counts.
	e.eventually(func() bool { return e.listConfigMaps(user) == nil })
}

// eventually waits, boundedly, for ok.
func (e *env) eventually(ok func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		e.t.Fatal("condition not met within 30s")
	}
}

// sar asks the server a SubjectAccessReview of a ConfigMap list.
func (e *env) sar(user string) authorizationv1.SubjectAccessReviewStatus {
	e.t.Helper()
	r, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(e.ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: "default"}}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Status
}

func wantStatus(t *testing.T, got authorizationv1.SubjectAccessReviewStatus, want authorizationv1.SubjectAccessReviewStatus) {
	t.Helper()
	if got != want {
		t.Fatalf("status %+v, want %+v", got, want)
	}
}

// TestAuthorizationConfigWebhookThenRBAC is the chain [Webhook, RBAC]:
// the webhook's allow and deny decide, its no opinion falls through to
// RBAC, with kube-apiserver's messages and review answers (those of
// kube-apiserver v1.37 with the same webhook and chain).
func TestAuthorizationConfigWebhookThenRBAC(t *testing.T) {
	w := newSARWebhook(t)
	file := filepath.Join(t.TempDir(), "authz.yaml")
	writeAuthzFile(t, file, authzConfig(webhookAuthorizer("test-webhook", w.kubeconfig, "NoOpinion",
		"matchConditions:", `- expression: request.user != "web-skipped"`), rbacAuthorizer))
	e := startAuthz(t, server.AuthorizationOptions{ConfigFile: file})

	if err := e.listConfigMaps("web-alice"); err != nil {
		t.Fatalf("web-alice, allowed by the webhook: %v", err)
	}
	// The webhook denies before RBAC, which would allow.
	e.bindView("web-bob")
	e.bindView("web-skipped")
	_, err := e.kube.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "web-mallory-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "web-mallory"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forbidden(t, e.listConfigMaps("web-mallory"), cmForbidden("web-mallory", "mallory is banned"))
	// No opinion with a reason: the reason is named after its webhook.
	forbidden(t, e.listConfigMaps("web-carol"), cmForbidden("web-carol", "test-webhook: not known to the webhook"))
	forbidden(t, e.listConfigMaps("web-nobody"), cmForbidden("web-nobody", ""))

	// The match condition skips the webhook for web-skipped: RBAC alone.
	if n := w.count("web-skipped"); n != 0 {
		t.Fatalf("the webhook was asked %d times about web-skipped", n)
	}

	// Answers are kept for the TTL: the same request again asks nothing.
	before := w.count("web-alice")
	for range 3 {
		if err := e.listConfigMaps("web-alice"); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count("web-alice"); n != before {
		t.Fatalf("the webhook was asked %d more times within its TTL", n-before)
	}

	// RBAC's escalation check asks the whole chain: the webhook lets
	// alice escalate, so she may write a role granting what RBAC never
	// gave her.
	if _, err := e.as("web-alice").RbacV1().ClusterRoles().Create(e.ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "by-alice"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("web-alice, allowed to escalate by the webhook: %v", err)
	}

	// SubjectAccessReviews go through the same chain.
	wantStatus(t, e.sar("web-alice"), authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice may do anything"})
	wantStatus(t, e.sar("web-mallory"), authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "mallory is banned"})
	wantStatus(t, e.sar("web-carol"), authorizationv1.SubjectAccessReviewStatus{Reason: "test-webhook: not known to the webhook"})
	wantStatus(t, e.sar("web-nobody"), authorizationv1.SubjectAccessReviewStatus{})
	if !e.sar("web-bob").Allowed {
		t.Fatal("web-bob, allowed by RBAC: not allowed by the review")
	}

	// A user's own review, and the rules review, which a webhook cannot
	// list.
	ssar, err := e.as("web-alice").AuthorizationV1().SelfSubjectAccessReviews().Create(e.ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "secrets", Namespace: "default"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ssar.Status, authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice may do anything"})
	ssrr, err := e.as("web-alice").AuthorizationV1().SelfSubjectRulesReviews().Create(e.ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ssrr.Status.Incomplete || ssrr.Status.EvaluationError != "webhook authorizer does not support user rule resolution" {
		t.Fatalf("rules review status %+v", ssrr.Status)
	}
	// The webhook's deny also refuses its own reviews to mallory.
	_, err = e.as("web-mallory").AuthorizationV1().SelfSubjectAccessReviews().Create(e.ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: "default"}}}, metav1.CreateOptions{})
	forbidden(t, err, `selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "web-mallory" cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope: mallory is banned`)
}

// TestAuthorizationConfigRBACThenWebhook is the chain [RBAC, Webhook]:
// what RBAC allows, the webhook is not asked about.
func TestAuthorizationConfigRBACThenWebhook(t *testing.T) {
	w := newSARWebhook(t)
	file := filepath.Join(t.TempDir(), "authz.yaml")
	writeAuthzFile(t, file, authzConfig(rbacAuthorizer, webhookAuthorizer("test-webhook", w.kubeconfig, "NoOpinion")))
	e := startAuthz(t, server.AuthorizationOptions{ConfigFile: file})

	e.bindView("web-mallory")
	calls := w.count("web-mallory")
	if err := e.listConfigMaps("web-mallory"); err != nil {
		t.Fatalf("web-mallory, allowed by RBAC first: %v", err)
	}
	// RBAC's view does not let secrets be read: the webhook denies.
	_, err := e.as("web-mallory").CoreV1().Secrets("default").List(e.ctx, metav1.ListOptions{})
	forbidden(t, err, `secrets is forbidden: User "web-mallory" cannot list resource "secrets" in API group "" in the namespace "default": mallory is banned`)
	if w.count("web-mallory") != calls+1 {
		t.Fatalf("the webhook was asked %d times, want once (for the secrets)", w.count("web-mallory")-calls)
	}
	if err := e.listConfigMaps("web-alice"); err != nil {
		t.Fatalf("web-alice, allowed by the webhook after RBAC: %v", err)
	}
	forbidden(t, e.listConfigMaps("web-carol"), cmForbidden("web-carol", "test-webhook: not known to the webhook"))
}

// TestAuthorizationConfigFailurePolicy: a webhook that cannot be reached
// has no opinion (failurePolicy NoOpinion: RBAC may still allow) or
// denies (Deny); either way an error with no allow is kube-apiserver's
// plain-text 500, and a review reports the error.
func TestAuthorizationConfigFailurePolicy(t *testing.T) {
	kubeconfig, addr := downWebhookKubeconfig(t)
	connErr := fmt.Sprintf(`Post "https://%s/authorize?timeout=3s": dial tcp %s: connect: connection refused`, addr, addr)
	for _, policy := range []string{"NoOpinion", "Deny"} {
		t.Run(policy, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "authz.yaml")
			writeAuthzFile(t, file, authzConfig(webhookAuthorizer("down-webhook", kubeconfig, policy), rbacAuthorizer))
			e := startAuthz(t, server.AuthorizationOptions{ConfigFile: file})
			_, err := e.kube.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "web-bob-view"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "web-bob"}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			internal := func(user string) {
				t.Helper()
				r := e.do("GET", "/api/v1/namespaces/default/configmaps", "", "Impersonate-User", user)
				want := `Internal Server Error: "/api/v1/namespaces/default/configmaps": ` + connErr + "\n"
				if r.code != http.StatusInternalServerError || string(r.body) != want {
					t.Fatalf("%s: %d %q, want 500 %q", user, r.code, r.body, want)
				}
			}
			internal("web-carol")
			if policy == "NoOpinion" {
				e.eventually(func() bool { return e.listConfigMaps("web-bob") == nil })
				wantStatus(t, e.sar("web-carol"), authorizationv1.SubjectAccessReviewStatus{EvaluationError: connErr})
				return
			}
			internal("web-bob")
			wantStatus(t, e.sar("web-bob"), authorizationv1.SubjectAccessReviewStatus{Denied: true, EvaluationError: connErr})
		})
	}
}

// TestAuthorizationConfigReload rewrites the file: the new chain serves
// once the server has read it; a file that is not a valid configuration
// (or drops RBAC, which the first one had) leaves the chain in use.
func TestAuthorizationConfigReload(t *testing.T) {
	w := newSARWebhook(t)
	file := filepath.Join(t.TempDir(), "authz.yaml")
	writeAuthzFile(t, file, authzConfig(rbacAuthorizer))
	e := startAuthz(t, server.AuthorizationOptions{ConfigFile: file, ReloadInterval: 100 * time.Millisecond})
	forbidden(t, e.listConfigMaps("web-alice"), cmForbidden("web-alice", ""))

	writeAuthzFile(t, file, authzConfig(webhookAuthorizer("test-webhook", w.kubeconfig, "NoOpinion"), rbacAuthorizer))
	e.eventually(func() bool { return e.listConfigMaps("web-alice") == nil })

	failures := func() string {
		r := e.do("GET", "/metrics", "")
		for _, l := range strings.Split(string(r.body), "\n") {
			if strings.HasPrefix(l, `apiserver_authorization_config_controller_automatic_reloads_total{status="failure"}`) {
				return strings.Fields(l)[1]
			}
		}
		return "0"
	}
	for i, bad := range []string{
		"authorizers: [{type: Bogus, name: bogus}]\n",
		authzConfig(webhookAuthorizer("test-webhook", w.kubeconfig, "NoOpinion")),
	} {
		writeAuthzFile(t, file, bad)
		want := fmt.Sprint(i + 1)
		e.eventually(func() bool { return failures() == want })
		if err := e.listConfigMaps("web-alice"); err != nil {
			t.Fatalf("after invalid file %d, the chain changed: %v", i, err)
		}
	}
	// Back to RBAC alone.
	writeAuthzFile(t, file, authzConfig(rbacAuthorizer))
	e.eventually(func() bool { return e.listConfigMaps("web-alice") != nil })
	forbidden(t, e.listConfigMaps("web-alice"), cmForbidden("web-alice", ""))
}

// TestAuthorizationModes: --authorization-mode with the webhook flags,
// the webhook named "default" as kube-apiserver names it, and reviews
// in version v1beta1 (the flag's default).
func TestAuthorizationModes(t *testing.T) {
	w := newSARWebhook(t)
	e := startAuthz(t, server.AuthorizationOptions{Modes: []string{"Webhook", "RBAC"}, WebhookConfigFile: w.kubeconfig, WebhookCacheAuthorizedTTL: -1})
	if err := e.listConfigMaps("web-alice"); err != nil {
		t.Fatal(err)
	}
	forbidden(t, e.listConfigMaps("web-mallory"), cmForbidden("web-mallory", "mallory is banned"))
	forbidden(t, e.listConfigMaps("web-carol"), cmForbidden("web-carol", "default: not known to the webhook"))
	// Authorized answers are not kept (TTL 0): each request asks.
	before := w.count("web-alice")
	for range 2 {
		if err := e.listConfigMaps("web-alice"); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count("web-alice") - before; n != 2 {
		t.Fatalf("the webhook was asked %d times for 2 requests with no cache", n)
	}
}

// TestAuthorizationAlwaysAllowDeny: AlwaysDeny refuses everyone but
// system:masters, with its reason; AlwaysAllow lets anyone in. The
// answers are kube-apiserver v1.37's.
func TestAuthorizationAlwaysAllowDeny(t *testing.T) {
	e := startAuthz(t, server.AuthorizationOptions{Modes: []string{"AlwaysDeny"}})
	// AlwaysDeny has no opinion, with a reason (as in Kubernetes).
	forbidden(t, e.listConfigMaps("web-bob"), cmForbidden("web-bob", "alwaysdeny: Everything is forbidden."))
	if _, err := e.kube.CoreV1().ConfigMaps("default").List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the admin (system:masters): %v", err)
	}
	wantStatus(t, e.sar("web-bob"), authorizationv1.SubjectAccessReviewStatus{Reason: "alwaysdeny: Everything is forbidden."})

	e = startAuthz(t, server.AuthorizationOptions{Modes: []string{"AlwaysAllow"}})
	if err := e.listConfigMaps("web-bob"); err != nil {
		t.Fatal(err)
	}
	anon := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(e.cfg))
	if _, err := anon.CoreV1().Secrets("kube-system").List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("anonymous under AlwaysAllow: %v", err)
	}
}

// TestAuthorizationNode: the Node authorizer with no Nodes or Pods, as
// kube-apiserver answers the same reviews.
func TestAuthorizationNode(t *testing.T) {
	e := startAuthz(t, server.AuthorizationOptions{Modes: []string{"Node", "RBAC"}})
	review := func(user string, ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		r, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(e.ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:nodes", "system:authenticated"}, ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	n1 := "system:node:n1"
	for _, c := range []struct {
		user string
		ra   authorizationv1.ResourceAttributes
		want authorizationv1.SubjectAccessReviewStatus
	}{
		{n1, authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "default", Name: "s"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: no relationship found between node 'n1' and this object"}},
		{n1, authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "default"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: No Object name found"}},
		{n1, authorizationv1.ResourceAttributes{Verb: "get", Resource: "serviceaccounts", Namespace: "default", Name: "default"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: no relationship found between node 'n1' and this object"}},
		{n1, authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "default", Name: "default"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: no relationship found between node 'n1' and this object"}},
		{n1, authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "n1"}, authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{n1, authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "default", Name: "n1"}, authorizationv1.SubjectAccessReviewStatus{Reason: `node: can only access leases in the "kube-node-lease" system namespace`}},
		{n1, authorizationv1.ResourceAttributes{Verb: "create", Resource: "events", Namespace: "default"}, authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{n1, authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: "n2"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: node 'n1' cannot read 'n2', only its own Node object"}},
		{n1, authorizationv1.ResourceAttributes{Verb: "get", Group: "storage.k8s.io", Resource: "csinodes", Subresource: "status", Name: "n1"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: CSINode status access requires CSIVolumeHealth feature"}},
		{"system:node:", authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: "n2"}, authorizationv1.SubjectAccessReviewStatus{Reason: `node: unknown node for user "system:node:"`}},
		{n1, authorizationv1.ResourceAttributes{Verb: "get", Group: "stable.example.com", Resource: "crontabs"}, authorizationv1.SubjectAccessReviewStatus{}},
		{n1, authorizationv1.ResourceAttributes{Verb: "list", Group: "certificates.k8s.io", Resource: "podcertificaterequests"}, authorizationv1.SubjectAccessReviewStatus{Reason: "node: can only list/watch podcertificaterequests with nodeName field selector"}},
	} {
		if got := review(c.user, c.ra); got != c.want {
			t.Errorf("%s %+v: %+v, want %+v", c.user, c.ra, got, c.want)
		}
	}
}

// TestAuthorizationDefaultRBAC: without configuration the chain is RBAC,
// named "rbac" in reasons; a binding to a missing role is an error in the
// reasons and in a rules review, which stays complete (kube-apiserver
// v1.37's answers).
func TestAuthorizationDefaultRBAC(t *testing.T) {
	e := start(t)
	_, err := e.kube.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "authz-probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "authz-nope"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "authz-u1"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reason := `rbac: RBAC: clusterrole.rbac.authorization.k8s.io "authz-nope" not found`
	e.eventually(func() bool { return e.sar("authz-u1").Reason == reason })
	forbidden(t, e.listConfigMaps("authz-u1"), cmForbidden("authz-u1", reason))
	ssrr, err := e.as("authz-u1").AuthorizationV1().SelfSubjectRulesReviews().Create(e.ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ssrr.Status.Incomplete || ssrr.Status.EvaluationError != `clusterrole.rbac.authorization.k8s.io "authz-nope" not found` {
		t.Fatalf("rules review status: incomplete %v, evaluationError %q", ssrr.Status.Incomplete, ssrr.Status.EvaluationError)
	}
}

// TestAuthorizationRefused: configurations kube-apiserver refuses at
// start are refused with its messages.
func TestAuthorizationRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.yaml")
	for _, c := range []struct {
		name   string
		config string
		o      server.AuthorizationOptions
		want   string
	}{
		{"config and mode", authzConfig(rbacAuthorizer), server.AuthorizationOptions{ConfigFile: file, Modes: []string{"RBAC"}},
			"--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined"},
		{"no timeout", authzConfig(strings.Replace(webhookAuthorizer("w", "/nonexistent", "Deny"), "    timeout: 3s\n", "", 1)), server.AuthorizationOptions{ConfigFile: file},
			`[authorizers[0].timeout: Required value, authorizers[0].connectionInfo.kubeConfigFile: Invalid value: "/nonexistent": error loading file: stat /nonexistent: no such file or directory]`},
		{"wrong name", authzConfig("- type: RBAC\n  name: roles\n"), server.AuthorizationOptions{ConfigFile: file}, "expected name rbac for authorizer RBAC instead of roles"},
		{"webhook without file", "", server.AuthorizationOptions{Modes: []string{"Webhook"}}, "authorization-mode Webhook's authorization config file not passed"},
		{"repeated mode", "", server.AuthorizationOptions{Modes: []string{"RBAC", "RBAC"}}, `authorization-mode ["RBAC" "RBAC"] has mode specified more than once`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.config != "" {
				writeAuthzFile(t, file, c.config)
			}
			_, err := crdtest.New(crdtest.Options{Server: func(cfg *server.Config) { cfg.Authorization = c.o }})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
