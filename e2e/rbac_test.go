package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// rbacCronTabsViewRole extends the default view role (and so edit and admin)
// to CronTabs, the way a CRD's author does it: by labelling a ClusterRole
// aggregate-to-view.
const rbacCronTabsViewRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: crontabs-view
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: ["stable.example.com"]
  resources: ["crontabs"]
  verbs: ["get", "list", "watch"]
`

// TestKubectlRBAC drives crdserver's authentication (x509 admin
// certificate, static tokens, anonymous) and authorization (system:masters,
// then RBAC with the default cluster roles) with the real kubectl: what a
// user may do before and after an admin grants it, kubectl auth can-i and
// whoami, impersonation, and the escalation check on roles.
func TestKubectlRBAC(t *testing.T) {
	janeToken := rbacToken(t, "jane")
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	// Kubernetes' static token CSV: token,user,uid,"group1,group2".
	tokens := fmt.Sprintf("%s,jane,jane-uid,\"dev-team\"\n", janeToken)
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token-auth-file", tokenFile)
	admin := newKubectl(t, srv)
	jane := rbacUserKubectl(t, srv, "jane", &clientcmdapi.AuthInfo{Token: janeToken})
	// kubectl asks for a user name and password when the user has no
	// credentials at all, so the anonymous user has only a name (as the
	// reference's anonymous context): kubectl sends a Basic header without
	// password, which Kubernetes ignores, so the request is anonymous.
	anonymous := rbacUserKubectl(t, srv, "anonymous", &clientcmdapi.AuthInfo{Username: "anonymous"})
	badToken := rbacUserKubectl(t, srv, "bad-token", &clientcmdapi.AuthInfo{Token: rbacToken(t, "unknown")})

	// The steps share the server's state: a step that sets up state for
	// the rest ends the scenario when it fails.
	must := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	must("admin over HTTPS", func(t *testing.T) {
		if !strings.HasPrefix(srv.url, "https://127.0.0.1:") {
			t.Errorf("crdserver serves on %s, want https://127.0.0.1:PORT", srv.url)
		}
		mustEqual(t, "kubectl get --raw /readyz", admin.run(t, "get", "--raw", "/readyz"), "ok")
		out := admin.run(t, "auth", "whoami")
		mustEqual(t, "whoami username", rbacWhoami(t, out, "Username"), "crdserver-admin")
		mustEqual(t, "whoami groups", rbacWhoami(t, out, "Groups"), "[system:masters system:authenticated]")
		// The admin needs nothing from RBAC: system:masters may do anything.
		mustEqual(t, "admin can-i * *", strings.TrimSpace(admin.run(t, "auth", "can-i", "*", "*", "--all-namespaces")), "yes")

		installCRD(t, admin)
		mustContain(t, admin.run(t, "apply", "-f", cronTabFile), "crontab.stable.example.com/"+cronTabName+" created")
		mustContain(t, admin.run(t, "create", "namespace", "team-b"), "namespace/team-b created")
		mustContain(t, admin.run(t, "apply", "-f", cronTabFile, "-n", "team-b"), "crontab.stable.example.com/"+cronTabName+" created")
	})

	t.Run("token user whoami", func(t *testing.T) {
		out := jane.run(t, "auth", "whoami")
		mustEqual(t, "whoami username", rbacWhoami(t, out, "Username"), "jane")
		mustEqual(t, "whoami uid", rbacWhoami(t, out, "UID"), "jane-uid")
		mustEqual(t, "whoami groups", rbacWhoami(t, out, "Groups"), "[dev-team system:authenticated]")
	})

	must("token user without a role is forbidden", func(t *testing.T) {
		mustEqual(t, "kubectl get crontabs as jane", jane.fail(t, "get", "crontabs"),
			`Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "jane" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default"`+"\n")
		// Discovery is allowed to every authenticated user (system:discovery).
		mustContain(t, jane.run(t, "get", "--raw", "/apis/stable.example.com/v1"), `"crontabs"`)
	})

	must("view role aggregated and bound", func(t *testing.T) {
		mustContain(t, admin.runStdin(t, rbacCronTabsViewRole, "apply", "-f", "-"), "clusterrole.rbac.authorization.k8s.io/crontabs-view created")
		mustContain(t, admin.run(t, "create", "rolebinding", "jane-view", "--clusterrole=view", "--user=jane", "-n", "default"),
			"rolebinding.rbac.authorization.k8s.io/jane-view created")

		// The aggregation controller copies the rule into view, and the
		// authorizer sees the new binding, within moments.
		var r result
		deadline := time.Now().Add(eventTimeout)
		for {
			r = jane.exec("", "get", "crontabs")
			if r.err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r.err != nil {
			t.Fatalf("jane still cannot list crontabs %v after the binding:\n%s\nthe view role:\n%s", eventTimeout, r, admin.run(t, "get", "clusterrole", "view", "-o", "yaml"))
		}
		mustEqual(t, "table header", tableHeader(t, r.stdout), "NAME AGE")
		tableRow(t, r.stdout, cronTabName)
		mustEqual(t, "jane get crontab -o name", jane.run(t, "get", "crontab", cronTabName, "-o", "name"), "crontab.stable.example.com/"+cronTabName+"\n")

		// The aggregated rule is in the view role itself.
		rules := admin.run(t, "get", "clusterrole", "view", "-o", `jsonpath={range .rules[*]}{.apiGroups} {.resources} {.verbs}{"\n"}{end}`)
		mustContain(t, rules, `["stable.example.com"] ["crontabs"] ["get","list","watch"]`)
	})

	t.Run("view is limited to its namespace and to reading", func(t *testing.T) {
		mustEqual(t, "jane get crontabs -n team-b", jane.fail(t, "get", "crontabs", "-n", "team-b"),
			`Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "jane" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "team-b"`+"\n")
		mustEqual(t, "jane get crontabs -A", jane.fail(t, "get", "crontabs", "--all-namespaces"),
			`Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "jane" cannot list resource "crontabs" in API group "stable.example.com" at the cluster scope`+"\n")
		r := jane.exec(secondCronTab, "create", "-f", "-")
		if r.err == nil {
			t.Fatalf("jane created a CronTab with only the view role:\n%s", r)
		}
		mustEqual(t, "jane create -f", r.stderr,
			`Error from server (Forbidden): error when creating "STDIN": crontabs.stable.example.com is forbidden: User "jane" cannot create resource "crontabs" in API group "stable.example.com" in the namespace "default"`+"\n")
		mustEqual(t, "jane delete crontab", jane.fail(t, "delete", "crontab", cronTabName),
			`Error from server (Forbidden): crontabs.stable.example.com "`+cronTabName+`" is forbidden: User "jane" cannot delete resource "crontabs" in API group "stable.example.com" in the namespace "default"`+"\n")
		// Nothing was created or deleted.
		mustEqual(t, "CronTabs in default", admin.run(t, "get", "crontabs", "-o", "name"), "crontab.stable.example.com/"+cronTabName+"\n")
	})

	t.Run("auth can-i", func(t *testing.T) {
		canI := func(t *testing.T, wantAllowed bool, args ...string) {
			t.Helper()
			r := jane.exec("", append([]string{"auth", "can-i"}, args...)...)
			// kubectl prints yes and exits 0, or no and exits 1.
			want, wantCode := "yes\n", 0
			if !wantAllowed {
				want, wantCode = "no\n", 1
			}
			if r.stdout != want || r.stderr != "" || rbacExitCode(r.err) != wantCode {
				t.Errorf("want stdout %q, no stderr and exit status %d:\n%s", want, wantCode, r)
			}
		}
		canI(t, true, "list", "crontabs")
		canI(t, true, "get", "crontabs.stable.example.com", "-n", "default")
		canI(t, true, "watch", "crontab/"+cronTabName)
		canI(t, false, "list", "crontabs", "-n", "team-b")
		canI(t, false, "list", "crontabs", "--all-namespaces")
		canI(t, false, "create", "crontabs")
		canI(t, false, "delete", "crontabs")
		canI(t, true, "get", "/apis")
		canI(t, false, "get", "/metrics")

		out := jane.run(t, "auth", "can-i", "--list", "-n", "default")
		if h := tableHeader(t, out); h != "Resources Non-Resource URLs Resource Names Verbs" {
			t.Errorf("can-i --list header %q:\n%s", h, out)
		}
		row := strings.Join(tableRow(t, out, "crontabs.stable.example.com"), " ")
		mustEqual(t, "can-i --list crontabs row", row, "crontabs.stable.example.com [] [] [get list watch]")
		row = strings.Join(tableRow(t, out, "selfsubjectaccessreviews.authorization.k8s.io"), " ")
		mustEqual(t, "can-i --list selfsubjectaccessreviews row", row, "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]")
		// Non-resource rows have no resource: their first column is the URL.
		for _, url := range []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version"} {
			row = strings.Join(tableRow(t, out, "["+url+"]"), " ")
			mustEqual(t, "can-i --list row of "+url, row, "["+url+"] [] [get]")
		}
		if strings.Contains(out, "[/metrics]") {
			t.Errorf("can-i --list shows /metrics, which jane may not get:\n%s", out)
		}

		// In another namespace the crontabs rule is gone; the cluster-wide
		// rules stay.
		out = jane.run(t, "auth", "can-i", "--list", "-n", "team-b")
		if strings.Contains(out, "crontabs") {
			t.Errorf("can-i --list -n team-b lists crontabs:\n%s", out)
		}
		tableRow(t, out, "[/apis]")
	})

	t.Run("impersonation", func(t *testing.T) {
		mustEqual(t, "admin --as=jane get crontabs -n kube-public", admin.fail(t, "--as=jane", "get", "crontabs", "-n", "kube-public"),
			`Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "jane" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "kube-public"`+"\n")
		// Impersonating jane gives jane's permissions, not the admin's.
		tableRow(t, admin.run(t, "--as=jane", "get", "crontabs"), cronTabName)

		// Impersonated without groups, the user is only system:authenticated
		// (the token file's group and UID are not looked up).
		out := admin.run(t, "--as=jane", "auth", "whoami")
		mustEqual(t, "whoami username", rbacWhoami(t, out, "Username"), "jane")
		mustEqual(t, "whoami groups", rbacWhoami(t, out, "Groups"), "[system:authenticated]")
		if strings.Contains(out, "UID") {
			t.Errorf("--as=jane whoami shows a UID:\n%s", out)
		}
		out = admin.run(t, "--as=jane", "--as-group=dev-team", "auth", "whoami")
		mustEqual(t, "whoami groups with --as-group", rbacWhoami(t, out, "Groups"), "[dev-team system:authenticated]")
		mustEqual(t, "admin --as=jane can-i list crontabs", admin.run(t, "--as=jane", "auth", "can-i", "list", "crontabs"), "yes\n")

		mustEqual(t, "jane --as=bob get crontabs", jane.fail(t, "--as=bob", "get", "crontabs"),
			`Error from server (Forbidden): users "bob" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope`+"\n")
	})

	t.Run("escalation", func(t *testing.T) {
		mustContain(t, admin.run(t, "create", "role", "role-writer", "--verb=create,get", "--resource=roles.rbac.authorization.k8s.io", "-n", "default"),
			"role.rbac.authorization.k8s.io/role-writer created")
		mustContain(t, admin.run(t, "create", "rolebinding", "jane-role-writer", "--role=role-writer", "--user=jane", "-n", "default"),
			"rolebinding.rbac.authorization.k8s.io/jane-role-writer created")
		// The binding takes effect within moments.
		var r result
		deadline := time.Now().Add(eventTimeout)
		for {
			r = jane.exec("", "auth", "can-i", "create", "roles.rbac.authorization.k8s.io")
			if r.stdout == "yes\n" || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r.stdout != "yes\n" {
			t.Fatalf("jane still cannot create roles %v after the binding:\n%s", eventTimeout, r)
		}

		// More than she holds: delete on crontabs.
		mustEqual(t, "jane create role with delete", jane.fail(t, "create", "role", "too-much", "--verb=get,list,delete", "--resource=crontabs.stable.example.com"),
			`Error from server (Forbidden): roles.rbac.authorization.k8s.io "too-much" is forbidden: user "jane" (groups=["dev-team" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`+"\n"+
				`{APIGroups:["stable.example.com"], Resources:["crontabs"], Verbs:["delete"]}`+"\n")
		// Every missing permission is listed, one line per resource,
		// sorted.
		mustEqual(t, "jane create role with two resources", jane.fail(t, "create", "role", "too-much-2", "--verb=get,update,delete", "--resource=crontabs.stable.example.com,roles.rbac.authorization.k8s.io"),
			`Error from server (Forbidden): roles.rbac.authorization.k8s.io "too-much-2" is forbidden: user "jane" (groups=["dev-team" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`+"\n"+
				`{APIGroups:["rbac.authorization.k8s.io"], Resources:["roles"], Verbs:["update" "delete"]}`+"\n"+
				`{APIGroups:["stable.example.com"], Resources:["crontabs"], Verbs:["update" "delete"]}`+"\n")
		mustContain(t, admin.fail(t, "get", "role", "too-much", "-n", "default"), `Error from server (NotFound): roles.rbac.authorization.k8s.io "too-much" not found`)

		// What she holds she may grant.
		mustEqual(t, "jane create role within her rights", jane.run(t, "create", "role", "crontab-reader", "--verb=get,list", "--resource=crontabs.stable.example.com"),
			"role.rbac.authorization.k8s.io/crontab-reader created\n")
		// Her create on roles is in default only.
		mustEqual(t, "jane create role in team-b", jane.fail(t, "create", "role", "crontab-reader", "--verb=get", "--resource=crontabs.stable.example.com", "-n", "team-b"),
			`Error from server (Forbidden): roles.rbac.authorization.k8s.io is forbidden: User "jane" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "team-b"`+"\n")
	})

	t.Run("anonymous", func(t *testing.T) {
		mustEqual(t, "anonymous get --raw /readyz", anonymous.run(t, "get", "--raw", "/readyz"), "ok")
		mustContain(t, anonymous.run(t, "get", "--raw", "/version"), `"gitVersion"`)
		mustEqual(t, "anonymous get --raw /apis", anonymous.fail(t, "get", "--raw", "/apis"),
			`Error from server (Forbidden): forbidden: User "system:anonymous" cannot get path "/apis"`+"\n")
		// system:basic-user is for authenticated users only.
		mustEqual(t, "anonymous auth whoami", anonymous.fail(t, "auth", "whoami"),
			"error: the selfsubjectreviews API is not enabled in the cluster or you do not have permission to call it\n")

		// The same without any Authorization header at all.
		client := rbacNoCredentialsClient(t, srv)
		for path, want := range map[string]int{"/readyz": http.StatusOK, "/livez": http.StatusOK, "/apis": http.StatusForbidden, "/api/v1/namespaces": http.StatusForbidden} {
			resp, err := client.Get(srv.url + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s without credentials: %d %s, want %d", path, resp.StatusCode, body, want)
			}
		}
	})

	t.Run("bad token", func(t *testing.T) {
		mustEqual(t, "bad token get --raw /readyz", badToken.fail(t, "get", "--raw", "/readyz"),
			"error: You must be logged in to the server (Unauthorized)\n")
		mustEqual(t, "bad token auth whoami", badToken.fail(t, "auth", "whoami"),
			"error: You must be logged in to the server (Unauthorized)\n")
		// kubectl's discovery fails first, and says so on stderr (through
		// klog) before the error.
		errOut := badToken.fail(t, "get", "crontabs")
		l := lines(errOut)
		mustEqual(t, "bad token get crontabs, last line", l[len(l)-1],
			"error: You must be logged in to the server (the server has asked for the client to provide credentials)")
	})
}

// rbacToken is a bearer token no other run uses.
func rbacToken(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// rbacUserKubectl is kubectl as another user: a kubeconfig with the admin
// kubeconfig's cluster (server URL and CA) and the given credentials, and a
// discovery cache of its own.
func rbacUserKubectl(t *testing.T, srv *server, name string, auth *clientcmdapi.AuthInfo) *kubectl {
	t.Helper()
	adminCfg, err := clientcmd.LoadFromFile(srv.kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", srv.kubeconfig, err)
	}
	adminCtx := adminCfg.Contexts[adminCfg.CurrentContext]
	if adminCtx == nil || adminCfg.Clusters[adminCtx.Cluster] == nil {
		t.Fatalf("%s has no current context with a cluster", srv.kubeconfig)
	}
	cluster := adminCfg.Clusters[adminCtx.Cluster]
	if cluster.Server != srv.url || len(cluster.CertificateAuthorityData) == 0 {
		t.Fatalf("admin kubeconfig's cluster: server %q (want %q), %d bytes of CA data", cluster.Server, srv.url, len(cluster.CertificateAuthorityData))
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["crdserver"] = cluster.DeepCopy()
	cfg.AuthInfos[name] = auth
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "crdserver", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	// kubectl only needs the server's kubeconfig; the process stays the
	// one startServer runs.
	return newKubectl(t, &server{dataDir: srv.dataDir, url: srv.url, kubeconfig: path})
}

// rbacWhoami is the value in the row of `kubectl auth whoami`'s table
// whose attribute is name.
func rbacWhoami(t *testing.T, out, name string) string {
	t.Helper()
	for _, l := range lines(out) {
		if attr, value, ok := strings.Cut(l, "  "); ok && attr == name {
			return strings.TrimSpace(value)
		}
	}
	t.Fatalf("kubectl auth whoami printed no %s:\n%s", name, out)
	return ""
}

// exitCode is a command's exit status from its error (0 for nil, -1 when
// it did not exit normally).
func rbacExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// rbacNoCredentialsClient trusts crdserver's CA and sends no credentials.
func rbacNoCredentialsClient(t *testing.T, srv *server) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(srv.dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s/pki/ca.crt", srv.dataDir)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: commandTimeout}
}
