package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestKubectlCoreTypes uses the core types the way a person does with
// kubectl: ConfigMaps and Secrets from literals and files, a
// ServiceAccount, a token for it and `kubectl auth whoami` with that token,
// tables, describe with the object's events, and explain.
func TestKubectlCoreTypes(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.run(t, "create", "namespace", "app")

	// ConfigMaps and Secrets.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.properties"), []byte("color=blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := k.run(t, "-n", "app", "create", "configmap", "settings", "--from-literal=mode=fast", "--from-file="+filepath.Join(dir, "app.properties")); out != "configmap/settings created\n" {
		t.Fatalf("create configmap: %q", out)
	}
	if got := k.run(t, "-n", "app", "get", "configmap", "settings", "-o", "jsonpath={.data.mode} {.data.app\\.properties}"); got != "fast color=blue\n" {
		t.Fatalf("configmap data %q", got)
	}
	if out := k.run(t, "-n", "app", "create", "secret", "generic", "creds", "--from-literal=password=s3cret"); out != "secret/creds created\n" {
		t.Fatalf("create secret: %q", out)
	}
	if got := k.run(t, "-n", "app", "get", "secret", "creds", "-o", "jsonpath={.type} {.data.password}"); got != "Opaque czNjcmV0" {
		t.Fatalf("secret %q", got)
	}
	// A bad key is refused by kubectl itself; one that kubectl lets
	// through is refused by the server with Kubernetes' message.
	stderr := k.fail(t, "-n", "app", "create", "configmap", "bad", "--from-literal=a b=c")
	if !strings.Contains(stderr, `"a b" is not a valid key name for a ConfigMap`) {
		t.Fatalf("bad key: %s", stderr)
	}
	r := k.exec(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad"},"data":{"a b":"c"}}`, "-n", "app", "create", "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, `The ConfigMap "bad" is invalid: data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters`) {
		t.Fatalf("bad key through the server:\n%s", r)
	}

	// Tables, as kube-apiserver's printers make them.
	out := k.run(t, "-n", "app", "get", "configmaps,secrets")
	if tableHeader(t, out) != "NAME DATA AGE" {
		t.Fatalf("tables:\n%s", out)
	}
	if row := tableRow(t, out, "configmap/settings"); row[1] != "2" {
		t.Fatalf("configmap row %v", row)
	}
	if row := tableRow(t, out, "secret/creds"); row[1] != "Opaque" || row[2] != "1" {
		t.Fatalf("secret row %v", row)
	}
	// The namespace has its default ServiceAccount and CA bundle.
	out = k.run(t, "-n", "app", "get", "serviceaccounts,configmaps")
	tableRow(t, out, "serviceaccount/default")
	tableRow(t, out, "configmap/kube-root-ca.crt")

	// A ServiceAccount, a token, and who the token is.
	k.run(t, "-n", "app", "create", "serviceaccount", "robot")
	token := strings.TrimSpace(k.run(t, "-n", "app", "create", "token", "robot", "--duration=20m"))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("token %q", token)
	}
	tokenConfig := writeTokenKubeconfig(t, srv, token)
	out = k.run(t, "--kubeconfig", tokenConfig, "auth", "whoami")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Username\s+system:serviceaccount:app:robot$`),
		regexp.MustCompile(`(?m)^Groups\s+\[system:serviceaccounts system:serviceaccounts:app system:authenticated\]$`),
		regexp.MustCompile(`(?m)^Extra: authentication.kubernetes.io/credential-id\s+\[JTI=[0-9a-f-]+\]$`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("whoami does not match %s:\n%s", want, out)
		}
	}
	// It may do nothing until it is given a role.
	if r := k.exec("", "--kubeconfig", tokenConfig, "-n", "app", "auth", "can-i", "get", "configmaps"); r.err == nil || r.stdout != "no\n" {
		t.Fatalf("can-i:\n%s", r)
	}
	stderr = k.fail(t, "--kubeconfig", tokenConfig, "-n", "app", "get", "configmaps")
	if !strings.Contains(stderr, `configmaps is forbidden: User "system:serviceaccount:app:robot" cannot list resource "configmaps" in API group "" in the namespace "app"`) {
		t.Fatalf("forbidden: %s", stderr)
	}
	k.run(t, "-n", "app", "create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=app:robot")
	crtEventually(t, "the binding to take effect", func(context.Context) (bool, error) {
		return k.exec("", "--kubeconfig", tokenConfig, "-n", "app", "get", "configmaps").err == nil, nil
	}, func() string { return "" })
	stderr = k.fail(t, "--kubeconfig", tokenConfig, "-n", "app", "get", "secrets")
	if !strings.Contains(stderr, `cannot list resource "secrets"`) {
		t.Fatalf("view reads secrets: %s", stderr)
	}
	// A token that is too short-lived is refused with Kubernetes' words.
	stderr = k.fail(t, "-n", "app", "create", "token", "robot", "--duration=5m")
	if !strings.Contains(stderr, "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes") {
		t.Fatalf("short token: %s", stderr)
	}

	// describe shows the object's events (kubectl finds them with a field
	// selector on the core Events: kind, name, namespace and uid).
	uid := k.run(t, "-n", "app", "get", "configmap", "settings", "-o", "jsonpath={.metadata.uid}")
	k.runStdin(t, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"settings.1","namespace":"app"},
		"involvedObject":{"kind":"ConfigMap","name":"settings","namespace":"app","apiVersion":"v1","uid":"`+uid+`"},
		"reason":"Rolled","message":"rolled out to 3 readers","type":"Normal","source":{"component":"deployer"},"count":2}`, "create", "-f", "-")
	out = k.run(t, "-n", "app", "describe", "configmap", "settings")
	if !regexp.MustCompile(`(?m)^\s+Normal\s+Rolled\s+.*deployer\s+rolled out to 3 readers$`).MatchString(out) {
		t.Fatalf("describe:\n%s", out)
	}
	out = k.run(t, "-n", "app", "get", "events")
	if tableHeader(t, out) != "LAST SEEN TYPE REASON OBJECT MESSAGE" || !strings.Contains(out, "configmap/settings") {
		t.Fatalf("events:\n%s", out)
	}
	if out := k.run(t, "-n", "app", "get", "events.events.k8s.io", "settings.1", "-o", "jsonpath={.note}"); out != "rolled out to 3 readers" {
		t.Fatalf("the event through events.k8s.io: %q", out)
	}

	// explain reads the published OpenAPI.
	out = k.run(t, "explain", "configmap.data")
	if !strings.Contains(out, "FIELD: data <map[string]string>") {
		t.Fatalf("explain:\n%s", out)
	}
	out = k.run(t, "explain", "lease.spec.holderIdentity")
	if !strings.Contains(out, "FIELD: holderIdentity <string>") {
		t.Fatalf("explain lease:\n%s", out)
	}
}

// writeTokenKubeconfig writes a kubeconfig that reaches srv with a bearer
// token and no client certificate.
func writeTokenKubeconfig(t *testing.T, srv *server, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var cluster *clientcmdapi.Cluster
	for _, c := range admin.Clusters {
		cluster = c
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = cluster
	cfg.AuthInfos["robot"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["robot"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "robot"}
	cfg.CurrentContext = "robot"
	path := filepath.Join(t.TempDir(), "robot.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
