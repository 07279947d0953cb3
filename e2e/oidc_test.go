package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testIssuer is an OpenID Connect issuer on 127.0.0.1 (TLS) with one RSA
// key.
type testIssuer struct {
	url, caPEM string
	key        *rsa.PrivateKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	i := &testIssuer{url: srv.URL, key: key, caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": i.url, "jwks_uri": i.url + "/keys", "response_types_supported": []string{"id_token"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	return i
}

// token is an ID token for sub in groups, for audience crdserver, that
// expires at exp.
func (i *testIssuer) token(t *testing.T, sub string, exp time.Time, groups ...string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: i.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"iss": i.url, "aud": "crdserver", "sub": sub, "iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix(),
		"groups": groups, "tenant": "acme"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOIDCKubectl logs kubectl in with OIDC ID tokens, as `kubectl
// --token` and as an exec credential plugin (kubectl oidc-login) do,
// against crdserver started with --authentication-config; the outputs
// are kube-apiserver v1.37's for the same configuration.
func TestOIDCKubectl(t *testing.T) {
	iss := newTestIssuer(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "authn.yaml")
	// The README's configuration, for this issuer.
	doc, err := os.ReadFile("testdata/oidc-authn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	placeholderCA := "      -----BEGIN CERTIFICATE-----\n      ...the issuer's CA...\n      -----END CERTIFICATE-----\n"
	ca := "      " + strings.ReplaceAll(strings.TrimSpace(iss.caPEM), "\n", "\n      ") + "\n"
	if !strings.Contains(string(doc), placeholderCA) {
		t.Fatalf("no CA placeholder in testdata/oidc-authn.yaml")
	}
	doc = []byte(strings.Replace(strings.Replace(string(doc), placeholderCA, ca, 1), "https://issuer.example.com", iss.url, 1))
	if err := os.WriteFile(config, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--authentication-config", config)
	admin := newKubectl(t, srv)

	// A kubeconfig with the server and its CA, and no credentials, for
	// --token; and one whose user gets its token from the plugin.
	kc, err := clientcmd.LoadFromFile(srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos = map[string]*clientcmdapi.AuthInfo{"oidc": {}}
	for _, c := range kc.Contexts {
		c.AuthInfo = "oidc"
	}
	noCreds := filepath.Join(dir, "token.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, noCreds); err != nil {
		t.Fatal(err)
	}
	plugin, err := filepath.Abs("testdata/oidc-login.sh")
	if err != nil {
		t.Fatal(err)
	}
	alice := iss.token(t, "alice", time.Now().Add(time.Hour), "devs", "qa")
	kc.AuthInfos["oidc"].Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: plugin,
		Env: []clientcmdapi.ExecEnvVar{{Name: "OIDC_ID_TOKEN", Value: alice}}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	withPlugin := filepath.Join(dir, "exec.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, withPlugin); err != nil {
		t.Fatal(err)
	}
	as := func(kubeconfig string) *kubectl {
		k := newKubectl(t, srv)
		k.srv = &server{kubeconfig: kubeconfig}
		return k
	}
	user, plugged := as(noCreds), as(withPlugin)

	// Who am I: the mapped user, as kube-apiserver maps it. The issuer's
	// keys are fetched in the background once the server starts.
	var r result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r = user.exec("", "--token", alice, "auth", "whoami", "-o", "json"); r.err == nil {
			break
		}
	}
	if r.err != nil {
		t.Fatalf("whoami:\n%s", r)
	}
	var ssr authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(r.stdout), &ssr); err != nil {
		t.Fatal(err)
	}
	want := authenticationv1.UserInfo{Username: "oidc:alice", UID: "alice", Groups: []string{"oidc:devs", "oidc:qa", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"example.com/tenant": {"acme"}}}
	if ssr.Kind != "SelfSubjectReview" || ssr.APIVersion != "authentication.k8s.io/v1" || !reflect.DeepEqual(ssr.Status.UserInfo, want) {
		t.Errorf("whoami -o json: %s", r.stdout)
	}
	const table = "ATTRIBUTE                   VALUE\n" +
		"Username                    oidc:alice\n" +
		"UID                         alice\n" +
		"Groups                      [oidc:devs oidc:qa system:authenticated]\n" +
		"Extra: example.com/tenant   [acme]\n"
	if got := plugged.run(t, "auth", "whoami"); got != table {
		t.Errorf("whoami through the exec plugin:\n%s\nwant\n%s", got, table)
	}

	// RBAC on the mapped group.
	bob := iss.token(t, "bob", time.Now().Add(time.Hour), "ops")
	forbidden := `Error from server (Forbidden): configmaps is forbidden: User "oidc:alice" cannot list resource "configmaps" in API group "" in the namespace "default"` + "\n"
	if got := user.fail(t, "--token", alice, "get", "configmaps"); got != forbidden {
		t.Errorf("before the binding: %q, want %q", got, forbidden)
	}
	admin.run(t, "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps")
	admin.run(t, "create", "rolebinding", "devs", "--role=cm-reader", "--group=oidc:devs")
	admin.run(t, "create", "configmap", "settings", "--from-literal=a=b")
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r := user.exec("", "--token", alice, "get", "configmaps", "-o", "name"); r.err == nil {
			out = r.stdout
			break
		}
	}
	if !strings.Contains(out, "configmap/settings\n") {
		t.Errorf("alice lists ConfigMaps: %q", out)
	}
	if got := plugged.run(t, "get", "configmap", "settings", "-o", "name"); got != "configmap/settings\n" {
		t.Errorf("through the exec plugin: %q", got)
	}
	if got, want := user.fail(t, "--token", bob, "get", "configmaps"), strings.ReplaceAll(forbidden, "oidc:alice", "oidc:bob"); got != want {
		t.Errorf("bob: %q, want %q", got, want)
	}

	// An expired token is not logged in.
	expired := iss.token(t, "alice", time.Now().Add(-time.Hour), "devs")
	if got, want := user.fail(t, "--token", expired, "auth", "whoami"), "error: You must be logged in to the server (Unauthorized)\n"; got != want {
		t.Errorf("expired token: %q, want %q", got, want)
	}
}
