package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/server"
)

// oidcIssuer is an OpenID Connect issuer on 127.0.0.1 (TLS): a discovery
// document, a key set with an RSA and an ECDSA key, and ID tokens signed
// with them.
type oidcIssuer struct {
	url, caPEM string
	rsa        *rsa.PrivateKey
	ec         *ecdsa.PrivateKey
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	i := &oidcIssuer{url: srv.URL, rsa: rsaKey, ec: ecKey,
		caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": i.url, "jwks_uri": i.url + "/keys", "response_types_supported": []string{"id_token"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256", "ES256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &rsaKey.PublicKey, KeyID: "rsa", Algorithm: "RS256", Use: "sig"},
			{Key: &ecKey.PublicKey, KeyID: "ec", Algorithm: "ES256", Use: "sig"}}})
	})
	return i
}

// claims are an ID token's claims for sub: for the issuer and audience
// crdserver, valid for a day, in groups devs and qa, of tenant acme;
// change them with mod.
func (i *oidcIssuer) claims(sub string, mod func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": i.url, "aud": "crdserver", "sub": sub, "iat": now.Unix(), "exp": now.Add(24 * time.Hour).Unix(),
		"groups": []string{"devs", "qa"}, "tenant": "acme"}
	if mod != nil {
		mod(c)
	}
	return c
}

// sign signs claims with key (an *rsa.PrivateKey: RS256; an
// *ecdsa.PrivateKey: ES256) under the key id kid.
func sign(t *testing.T, key any, kid string, claims map[string]any) string {
	t.Helper()
	alg := jose.RS256
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = jose.ES256
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authnConfig is an AuthenticationConfiguration trusting the issuer for
// audience: users oidc:<sub> (uid the sub), groups oidc:<group>, the
// tenant in extra, tokens of tenant acme only, and no oidc:system: users.
func (i *oidcIssuer) authnConfig(audience string) string {
	ca := "      " + strings.ReplaceAll(strings.TrimSpace(i.caPEM), "\n", "\n      ")
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %s
    audiences: [%s]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
%s
  claimValidationRules:
  - expression: "claims.?tenant.orValue('') == 'acme'"
    message: "the token's tenant must be acme"
  claimMappings:
    username:
      expression: "'oidc:' + claims.sub"
    groups:
      claim: groups
      prefix: "oidc:"
    uid:
      claim: sub
    extra:
    - key: example.com/tenant
      valueExpression: "claims.tenant"
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:system:')"
    message: "username cannot use reserved system: prefix"
`, i.url, audience, ca)
}

// syncLog collects a server's logs.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// unauthorizedBody is kube-apiserver's 401 body.
const unauthorizedBody = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`

// bearer sends a raw GET with a bearer token only.
func (e *env) bearer(token, path string) response {
	e.t.Helper()
	cfg := rest.AnonymousClientConfig(e.cfg)
	cfg.BearerToken = token
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.doWith(rt, http.MethodGet, path, "")
}

func (e *env) asToken(token string) kubernetes.Interface {
	cfg := rest.AnonymousClientConfig(e.cfg)
	cfg.BearerToken = token
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestOIDC logs users in with ID tokens of an issuer an
// AuthenticationConfiguration trusts, with the answers kube-apiserver
// v1.37 gives for the same configuration and tokens: the mapped user,
// RBAC on the mapped groups, 401s, TokenReviews, and reloads of the file.
func TestOIDC(t *testing.T) {
	iss := newOIDCIssuer(t)
	file := filepath.Join(t.TempDir(), "authn.yaml")
	if err := os.WriteFile(file, []byte(iss.authnConfig("crdserver")), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	e := start(t, func(c *server.Config) {
		c.Authentication.ConfigFile = file
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx := e.ctx

	alice := sign(t, iss.rsa, "rsa", iss.claims("alice", nil))
	bob := sign(t, iss.ec, "ec", iss.claims("bob", func(c map[string]any) { c["groups"] = []string{"ops"} }))
	whoami := func(token string) authenticationv1.UserInfo {
		t.Helper()
		var ssr *authenticationv1.SelfSubjectReview
		// The issuer's keys are fetched in the background after start.
		waitAllowed(t, func() (err error) {
			ssr, err = e.asToken(token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			return err
		})
		return ssr.Status.UserInfo
	}
	tenant := map[string]authenticationv1.ExtraValue{"example.com/tenant": {"acme"}}
	if got, want := whoami(alice), (authenticationv1.UserInfo{Username: "oidc:alice", UID: "alice",
		Groups: []string{"oidc:devs", "oidc:qa", "system:authenticated"}, Extra: tenant}); !reflect.DeepEqual(got, want) {
		t.Errorf("RS256 token: %+v, want %+v", got, want)
	}
	if got, want := whoami(bob), (authenticationv1.UserInfo{Username: "oidc:bob", UID: "bob",
		Groups: []string{"oidc:ops", "system:authenticated"}, Extra: tenant}); !reflect.DeepEqual(got, want) {
		t.Errorf("ES256 token: %+v, want %+v", got, want)
	}

	// RBAC on the mapped group: oidc:devs may list ConfigMaps in default.
	if _, err := e.kube.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "devs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "oidc:devs"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, func() error {
		_, err := e.asToken(alice).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := e.asToken(bob).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) ||
		err.Error() != `configmaps is forbidden: User "oidc:bob" cannot list resource "configmaps" in API group "" in the namespace "default"` {
		t.Errorf("bob lists ConfigMaps: %v", err)
	}

	// Tokens that do not authenticate: 401 with kube's Status, and the
	// reasons kube-apiserver's TokenReview gives.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(-time.Hour).Unix()
	bad := []struct{ name, token, reason string }{
		{"expired", sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["exp"], c["iat"] = expiry, expiry-3600 })),
			fmt.Sprintf("[invalid bearer token, oidc: verify token: oidc: token is expired (Token Expiry: %v)]", time.Unix(expiry, 0))},
		{"wrong audience", sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["aud"] = "other" })),
			`[invalid bearer token, oidc: verify token: oidc: expected audience "crdserver" got ["other"]]`},
		{"bad signature", sign(t, other, "rsa", iss.claims("alice", nil)),
			"[invalid bearer token, oidc: verify token: failed to verify signature: failed to verify id token signature]"},
		{"unknown issuer", sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["iss"] = "https://unknown.example.com" })),
			"invalid bearer token"},
		{"claim validation rule", sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["tenant"] = "initech" })),
			"[invalid bearer token, oidc: error evaluating claim validation expression: validation expression 'claims.?tenant.orValue('') == 'acme'' failed: the token's tenant must be acme]"},
		{"user validation rule", sign(t, iss.rsa, "rsa", iss.claims("system:evil", nil)),
			"[invalid bearer token, oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith('oidc:system:')' failed: username cannot use reserved system: prefix]"},
	}
	review := func(token string) authenticationv1.TokenReviewStatus {
		t.Helper()
		tr, err := e.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status
	}
	for _, c := range bad {
		if r := e.bearer(c.token, "/api/v1/namespaces/default/configmaps"); r.code != http.StatusUnauthorized || compact(string(r.body)) != unauthorizedBody {
			t.Errorf("%s: %d %s", c.name, r.code, r.body)
		}
		if got := review(c.token); got.Authenticated || got.Error != c.reason {
			t.Errorf("%s: TokenReview %+v, want error %q", c.name, got, c.reason)
		}
	}

	// A TokenReview of a good token: the mapped user, for the server's
	// audience.
	if got, want := review(alice), (authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{defaultAudience},
		User: authenticationv1.UserInfo{Username: "oidc:alice", UID: "alice", Groups: []string{"oidc:devs", "oidc:qa", "system:authenticated"}, Extra: tenant}}); !reflect.DeepEqual(got, want) {
		t.Errorf("TokenReview: %+v, want %+v", got, want)
	}

	// Reload: a new audience replaces the old one once the issuer is
	// reachable with it.
	alice2 := sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["aud"] = "crdserver-2" }))
	if err := os.WriteFile(file, []byte(iss.authnConfig("crdserver-2")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		return e.bearer(alice2, "/api").code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the new audience is not accepted: %v; logs:\n%s", err, logs)
	}
	if r := e.bearer(alice, "/api"); r.code != http.StatusUnauthorized || compact(string(r.body)) != unauthorizedBody {
		t.Errorf("old audience after the reload: %d %s", r.code, r.body)
	}

	// A file that does not validate is logged and the configuration stays.
	if err := os.WriteFile(file, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: http://bad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const invalid = `msg="failed to validate authentication config" err="[jwt[0].issuer.url: Invalid value: \"http://bad\": URL scheme must be https, ` +
		`jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required, jwt[0].claimMappings.username: Required value: claim or expression is required]"`
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), invalid), nil
	}); err != nil {
		t.Fatalf("the broken file is not reported: %v; logs:\n%s", err, logs)
	}
	if r := e.bearer(alice2, "/api"); r.code != http.StatusOK {
		t.Errorf("after a broken file: %d %s", r.code, r.body)
	}
}

// TestOIDCFlags logs in with the --oidc-* flags' one issuer: user names
// prefixed with the issuer URL (the claim is not email), prefixed groups,
// required claims, RS256 only; and refuses the flags with
// --authentication-config, as kube-apiserver does.
func TestOIDCFlags(t *testing.T) {
	iss := newOIDCIssuer(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(iss.caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	oidc := server.OIDCOptions{IssuerURL: iss.url, ClientID: "crdserver", CAFile: caFile, UsernameClaim: "sub", GroupsClaim: "groups", GroupsPrefix: "oidc:",
		RequiredClaims: map[string]string{"tenant": "acme"}, SigningAlgs: []string{"RS256"}}
	e := start(t, func(c *server.Config) { c.Authentication.OIDC = oidc })
	alice := sign(t, iss.rsa, "rsa", iss.claims("alice", nil))
	var ssr *authenticationv1.SelfSubjectReview
	waitAllowed(t, func() (err error) {
		ssr, err = e.asToken(alice).AuthenticationV1().SelfSubjectReviews().Create(e.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return err
	})
	if got, want := ssr.Status.UserInfo, (authenticationv1.UserInfo{Username: iss.url + "#alice", Groups: []string{"oidc:devs", "oidc:qa", "system:authenticated"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("user %+v, want %+v", got, want)
	}
	for name, token := range map[string]string{
		"ES256, not allowed": sign(t, iss.ec, "ec", iss.claims("bob", nil)),
		"required claim":     sign(t, iss.rsa, "rsa", iss.claims("alice", func(c map[string]any) { c["tenant"] = "initech" })),
	} {
		if r := e.bearer(token, "/api"); r.code != http.StatusUnauthorized || compact(string(r.body)) != unauthorizedBody {
			t.Errorf("%s: %d %s", name, r.code, r.body)
		}
	}

	// The flags and a configuration file exclude each other; the flags
	// need both the issuer and the client ID.
	dir := t.TempDir()
	for _, c := range []struct {
		authn server.AuthenticationOptions
		err   string
	}{
		{server.AuthenticationOptions{ConfigFile: caFile, OIDC: oidc}, "authentication-config file and oidc-* flags are mutually exclusive"},
		{server.AuthenticationOptions{OIDC: server.OIDCOptions{GroupsClaim: "groups"}}, "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"},
	} {
		_, err := server.Start(e.ctx, server.Config{DataDir: dir, Authentication: c.authn, EtcdNoFsync: true})
		if err == nil || err.Error() != c.err {
			t.Errorf("%+v: %v, want %q", c.authn, err, c.err)
		}
	}
}

// TestOIDCBadConfigFile: the server refuses to start with a file that
// does not decode or validate, with kube-apiserver's messages.
func TestOIDCBadConfigFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, err string }{
		{"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwtx: []\n", `failed to load authentication configuration from file "%s": strict decoding error: unknown field "jwtx"`},
		{"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: http://example.com\n    audiences: []\n  claimMappings:\n    username:\n      claim: sub\n",
			`invalid authentication configuration: [jwt[0].issuer.url: Invalid value: "http://example.com": URL scheme must be https, jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required, ` +
				`jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing]`},
		{"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: true\n",
			`anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file`},
	} {
		file := filepath.Join(dir, "authn.yaml")
		if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		want := c.err
		if strings.Contains(want, "%s") {
			want = fmt.Sprintf(want, file)
		}
		_, err := server.Start(context.Background(), server.Config{DataDir: filepath.Join(dir, "data"), EtcdNoFsync: true, DisableAnonymous: true,
			Authentication: server.AuthenticationOptions{ConfigFile: file}})
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", c.file, err, want)
		}
	}
}

// TestOIDCAnonymousConditions: the file's anonymous section lets requests
// without credentials in on its paths only.
func TestOIDCAnonymousConditions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "authn.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *server.Config) { c.Authentication.ConfigFile = file })
	if r := e.bearer("", "/livez"); r.code != http.StatusOK {
		t.Errorf("/livez: %d %s", r.code, r.body)
	}
	if r := e.bearer("", "/version"); r.code != http.StatusUnauthorized || compact(string(r.body)) != unauthorizedBody {
		t.Errorf("/version: %d %s", r.code, r.body)
	}
}

// tokenWebhook answers TokenReviews (authentication.k8s.io/v1): token
// "carol" is carol, "broken" is a 500, anything else is not
// authenticated. It counts the reviews.
type tokenWebhook struct {
	calls atomic.Int32
	srv   *httptest.Server
}

func newTokenWebhook(t *testing.T) *tokenWebhook {
	w := &tokenWebhook{}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.calls.Add(1)
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil || r.URL.Path != "/authenticate" {
			http.Error(rw, "bad review", http.StatusBadRequest)
			return
		}
		switch tr.Spec.Token {
		case "carol":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "carol", UID: "c-1",
				Groups: []string{"hooked"}, Extra: map[string]authenticationv1.ExtraValue{"example.com/via": {"webhook"}}}}
		case "broken":
			http.Error(rw, "webhook down", http.StatusInternalServerError)
			return
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "unknown token"}
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(tr)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// kubeconfig writes the webhook's kubeconfig.
func (w *tokenWebhook) kubeconfig(t *testing.T) string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	file := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: authn
  cluster:
    server: %s/authenticate
    certificate-authority-data: %s
users:
- name: crdserver
contexts:
- name: authn
  context: {cluster: authn, user: crdserver}
current-context: authn
`, w.srv.URL, mustJSON(ca))
	if err := os.WriteFile(file, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestTokenWebhook authenticates bearer tokens with a TokenReview webhook
// after the other authenticators, its answers cached for the TTL.
func TestTokenWebhook(t *testing.T) {
	wh := newTokenWebhook(t)
	e := start(t, func(c *server.Config) {
		c.Authentication.TokenWebhook = server.TokenWebhookOptions{ConfigFile: wh.kubeconfig(t), Version: "v1", CacheTTL: time.Hour}
	})
	ctx := e.ctx
	ssr, err := e.asToken("carol").AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	carol := authenticationv1.UserInfo{Username: "carol", UID: "c-1", Groups: []string{"hooked", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"example.com/via": {"webhook"}}}
	if !reflect.DeepEqual(ssr.Status.UserInfo, carol) {
		t.Errorf("webhook user %+v, want %+v", ssr.Status.UserInfo, carol)
	}
	// Within the TTL the answer is the cached one.
	calls := wh.calls.Load()
	for range 3 {
		if r := e.bearer("carol", "/api"); r.code != http.StatusOK {
			t.Fatalf("carol: %d %s", r.code, r.body)
		}
	}
	if got := wh.calls.Load(); got != calls {
		t.Errorf("webhook called %d times more for a cached token", got-calls)
	}
	// A ServiceAccount's token authenticates before the webhook.
	if _, err := e.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.bearer(tr.Status.Token, "/api"); r.code != http.StatusOK || wh.calls.Load() != calls {
		t.Errorf("ServiceAccount token: %d, webhook calls %d more", r.code, wh.calls.Load()-calls)
	}
	// Refused and failed reviews are 401.
	for _, token := range []string{"nobody", "broken"} {
		if r := e.bearer(token, "/api"); r.code != http.StatusUnauthorized || compact(string(r.body)) != unauthorizedBody {
			t.Errorf("%s: %d %s", token, r.code, r.body)
		}
	}
	// A TokenReview of a webhook token answers the webhook's user, for
	// the server's audiences.
	rv, err := e.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "carol"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (authenticationv1.TokenReviewStatus{Authenticated: true, User: carol, Audiences: []string{defaultAudience}}); !reflect.DeepEqual(rv.Status, want) {
		t.Errorf("TokenReview %+v, want %+v", rv.Status, want)
	}
}

// TestTokenWebhookCacheTTL: once the TTL is over the webhook is asked
// again; without a cache it is asked every time.
func TestTokenWebhookCacheTTL(t *testing.T) {
	wh := newTokenWebhook(t)
	kc := wh.kubeconfig(t)
	e := start(t, func(c *server.Config) {
		c.Authentication.TokenWebhook = server.TokenWebhookOptions{ConfigFile: kc, Version: "v1", CacheTTL: 50 * time.Millisecond}
	})
	if r := e.bearer("carol", "/api"); r.code != http.StatusOK {
		t.Fatalf("carol: %d %s", r.code, r.body)
	}
	first := wh.calls.Load()
	if err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, false, func(context.Context) (bool, error) {
		return e.bearer("carol", "/api").code == http.StatusOK && wh.calls.Load() > first, nil
	}); err != nil {
		t.Errorf("the webhook is not asked again after the TTL: %v", err)
	}

	nocache := start(t, func(c *server.Config) {
		c.Authentication.TokenWebhook = server.TokenWebhookOptions{ConfigFile: kc, Version: "v1", CacheTTL: -1}
	})
	before := wh.calls.Load()
	for range 3 {
		if r := nocache.bearer("carol", "/api"); r.code != http.StatusOK {
			t.Fatalf("carol: %d %s", r.code, r.body)
		}
	}
	if got := wh.calls.Load() - before; got != 3 {
		t.Errorf("without a cache: %d webhook calls for 3 requests", got)
	}
}
