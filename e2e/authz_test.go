package e2e

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestKubectlAuthorizationWebhook runs crdserver with
// --authorization-config: a SubjectAccessReview webhook, then RBAC. kubectl
// as a user only the webhook allows may do what the webhook says, and what
// kubectl prints for the users the webhook denies or has no opinion about
// is what it prints against kube-apiserver v1.37 with the same chain and
// webhook.
func TestKubectlAuthorizationWebhook(t *testing.T) {
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct {
			APIVersion string `json:"apiVersion"`
			Spec       struct {
				User               string          `json:"user"`
				ResourceAttributes json.RawMessage `json:"resourceAttributes"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
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
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": in.APIVersion, "kind": "SubjectAccessReview", "status": status})
	}))
	defer hook.Close()

	dir := t.TempDir()
	caFile := filepath.Join(dir, "webhook-ca.crt")
	writeTestFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})))
	kubeconfig := filepath.Join(dir, "webhook.kubeconfig")
	writeTestFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: w
  cluster:
    server: %s/authorize
    certificate-authority: %s
users:
- name: w
contexts:
- name: w
  context: {cluster: w, user: w}
current-context: w
`, hook.URL, caFile))
	config := filepath.Join(dir, "authz.yaml")
	writeTestFile(t, config, fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: Webhook
  name: test-webhook
  webhook:
    timeout: 3s
    authorizedTTL: 1m
    unauthorizedTTL: 10s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: NoOpinion
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: %s
    matchConditions:
    - expression: request.user != "web-skipped"
- type: RBAC
  name: rbac
`, kubeconfig))
	users := []string{"web-alice", "web-mallory", "web-carol", "web-skipped"}
	tokens := map[string]string{}
	var csv strings.Builder
	for _, u := range users {
		tokens[u] = rbacToken(t, u)
		fmt.Fprintf(&csv, "%s,%s,%s-uid\n", tokens[u], u, u)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	writeTestFile(t, tokenFile, csv.String())

	srv := startServer(t, "--authorization-config", config, "--token-auth-file", tokenFile)
	as := func(u string) *kubectl { return rbacUserKubectl(t, srv, u, &clientcmdapi.AuthInfo{Token: tokens[u]}) }
	alice, mallory, carol, skipped := as("web-alice"), as("web-mallory"), as("web-carol"), as("web-skipped")

	// The webhook alone allows alice: real requests, and can-i.
	mustEqual(t, "can-i", alice.run(t, "auth", "can-i", "create", "configmaps"), "yes\n")
	alice.run(t, "create", "configmap", "by-alice", "--from-literal=a=b")
	mustContain(t, alice.run(t, "get", "configmaps"), "by-alice")
	alice.run(t, "delete", "configmap", "by-alice")

	// kube-apiserver's answers for the others.
	mustEqual(t, "mallory's list", mallory.fail(t, "get", "configmaps"),
		`Error from server (Forbidden): configmaps is forbidden: User "web-mallory" cannot list resource "configmaps" in API group "" in the namespace "default": mallory is banned`+"\n")
	mustEqual(t, "carol's list", carol.fail(t, "get", "configmaps"),
		`Error from server (Forbidden): configmaps is forbidden: User "web-carol" cannot list resource "configmaps" in API group "" in the namespace "default": test-webhook: not known to the webhook`+"\n")
	mustEqual(t, "skipped's list", skipped.fail(t, "get", "configmaps"),
		`Error from server (Forbidden): configmaps is forbidden: User "web-skipped" cannot list resource "configmaps" in API group "" in the namespace "default"`+"\n")
	r := carol.exec("", "auth", "can-i", "list", "configmaps")
	if r.err == nil || r.stdout != "no - test-webhook: not known to the webhook\n" {
		t.Fatalf("carol's can-i:\n%s", r)
	}
	// The webhook denies mallory even her own access review.
	r = mallory.exec("", "auth", "can-i", "list", "configmaps")
	if r.err == nil || !strings.Contains(r.stderr, `Error from server (Forbidden): selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "web-mallory" cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope: mallory is banned`) {
		t.Fatalf("mallory's can-i:\n%s", r)
	}
	// A webhook cannot list its rules.
	r = alice.exec("", "auth", "can-i", "--list")
	if r.err != nil || !strings.Contains(r.stderr, "Warning: the list may be incomplete: webhook authorizer does not support user rule resolution") {
		t.Fatalf("alice's can-i --list:\n%s", r)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
