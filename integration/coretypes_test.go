package integration

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kptr "k8s.io/utils/ptr"

	"github.com/crdserver/crdserver/server"
)

// The answers below are kube-apiserver v1.37.2's to the same requests,
// taken from a real one.

const configKeyMsg = `a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`

// causes are a Status error's causes as "field: message".
func causes(err error) []string {
	var out []string
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			out = append(out, c.Field+": "+c.Message)
		}
	}
	return out
}

func expectInvalid(t *testing.T, err error, message string, wantCauses ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || err.Error() != message {
		t.Fatalf("got %v\nwant 422 %q", err, message)
	}
	if got := causes(err); strings.Join(got, "\n") != strings.Join(wantCauses, "\n") {
		t.Fatalf("causes %q\nwant %q", got, wantCauses)
	}
}

func TestConfigMaps(t *testing.T) {
	e := start(t)
	cms := e.kube.CoreV1().ConfigMaps("default")
	ctx := e.ctx
	// Created through the typed clientset: protobuf bodies.
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0, 1, 2}}}, metav1.CreateOptions{})
	if err != nil || cm.Data["a"] != "1" || string(cm.BinaryData["b"]) != "\x00\x01\x02" || cm.UID == "" {
		t.Fatalf("create: %v %+v", err, cm)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Data: map[string]string{"a/b": "x", "ok": "y"}, BinaryData: map[string][]byte{"ok": {1}}}, metav1.CreateOptions{})
	expectInvalid(t, err, `ConfigMap "bad" is invalid: [data[a/b]: Invalid value: "a/b": `+configKeyMsg+`, data[ok]: Invalid value: "ok": duplicate of key present in binaryData]`,
		`data[a/b]: Invalid value: "a/b": `+configKeyMsg, `data[ok]: Invalid value: "ok": duplicate of key present in binaryData`)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data: map[string]string{"a": strings.Repeat("x", 1024*1024+1)}}, metav1.CreateOptions{})
	expectInvalid(t, err, `ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes`, "[]: Too long: may not be more than 1048576 bytes")
	// Immutable.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Data: map[string]string{"a": "1"}, Immutable: kptr.To(true)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	frozen, _ := cms.Get(ctx, "frozen", metav1.GetOptions{})
	frozen.Data["a"], frozen.Immutable = "2", kptr.To(false)
	_, err = cms.Update(ctx, frozen, metav1.UpdateOptions{})
	expectInvalid(t, err, "ConfigMap \"frozen\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, data: Forbidden: field is immutable when `immutable` is set]",
		"immutable: Forbidden: field is immutable when `immutable` is set", "data: Forbidden: field is immutable when `immutable` is set")
	// Labels may still change on an immutable ConfigMap, and it may go.
	frozen, _ = cms.Get(ctx, "frozen", metav1.GetOptions{})
	frozen.Labels = map[string]string{"l": "v"}
	if _, err := cms.Update(ctx, frozen, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label an immutable ConfigMap: %v", err)
	}
	if err := cms.Delete(ctx, "frozen", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubectl's table.
	r := e.do("GET", "/api/v1/namespaces/default/configmaps", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"name":"Data"`) || !contains(r.body, `"cells":["c",2,`) {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
}

func TestSecrets(t *testing.T) {
	e := start(t)
	secrets := e.kube.CoreV1().Secrets("default")
	ctx := e.ctx
	// stringData is merged into data and not kept; Opaque by default.
	s, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data: map[string][]byte{"x": []byte("old"), "z": []byte("z")}, StringData: map[string]string{"x": "y"}}, metav1.CreateOptions{})
	if err != nil || string(s.Data["x"]) != "y" || string(s.Data["z"]) != "z" || s.StringData != nil || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("create: %v %+v", err, s)
	}
	r := e.do("GET", "/api/v1/namespaces/default/secrets/s", "")
	if contains(r.body, "stringData") {
		t.Fatalf("stringData stored: %s", r.body)
	}
	// The type is immutable; each type wants its keys.
	s.Type = corev1.SecretTypeBasicAuth
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	expectInvalid(t, err, `Secret "s" is invalid: [type: Invalid value: "kubernetes.io/basic-auth": field is immutable, data[username]: Required value, data[password]: Required value]`,
		`type: Invalid value: "kubernetes.io/basic-auth": field is immutable`, "data[username]: Required value", "data[password]: Required value")
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS}, metav1.CreateOptions{})
	expectInvalid(t, err, `Secret "tls" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]`, "data[tls.crt]: Required value", "data[tls.key]: Required value")
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dcj"}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{".dockerconfigjson": "{nope"}}, metav1.CreateOptions{})
	expectInvalid(t, err, `Secret "dcj" is invalid: data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character 'n' looking for beginning of object key string`,
		`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character 'n' looking for beginning of object key string`)
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Data: map[string][]byte{"a b": nil}}, metav1.CreateOptions{})
	expectInvalid(t, err, `Secret "k" is invalid: data[a b]: Invalid value: "a b": `+configKeyMsg, `data[a b]: Invalid value: "a b": `+configKeyMsg)
	// A TLS secret whose key is not its certificate's is stored, with a
	// warning.
	warnings := &recordedWarnings{}
	cfg := rest.CopyConfig(e.cfg)
	cfg.WarningHandler = warnings
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := warnings.all(); len(got) != 1 || got[0] != "tls: failed to find any PEM data in certificate input" {
		t.Fatalf("warnings %q", got)
	}
	// Field selector on type.
	list, err := secrets.List(ctx, metav1.ListOptions{FieldSelector: "type=kubernetes.io/tls"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "tls" {
		t.Fatalf("by type: %v %+v", err, list)
	}
}

// recordedWarnings keeps the Warning headers client-go sees.
type recordedWarnings struct {
	mu   sync.Mutex
	list []string
}

func (w *recordedWarnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *recordedWarnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// aesKey is a 32-byte key named name, base64, as EncryptionConfiguration
// takes it.
func aesKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// etcdGet reads a key's stored value straight from etcd.
func etcdGet(t *testing.T, endpoint, key string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v %+v", key, err, resp)
	}
	return string(resp.Kvs[0].Value)
}

// Secrets are encrypted in etcd with the EncryptionConfiguration given; a
// rotation (a new key first, the old one still listed) keeps the old data
// readable, and new writes use the new key.
func TestSecretsEncryptedAtRest(t *testing.T) {
	endpoint := startExternalEtcd(t)
	dir := t.TempDir()
	config := func(keys ...string) string {
		var b strings.Builder
		b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  - aescbc:\n      keys:\n      - name: %s\n        secret: %s\n", k, aesKey(k))
		}
		b.WriteString("  - identity: {}\n")
		f := dir + "/" + strings.Join(keys, "-") + ".yaml"
		writeFile(t, f, b.String())
		return f
	}
	first := config("key1")
	e := start(t, func(c *server.Config) { c.EtcdServers = []string{endpoint}; c.EncryptionProviderConfig = first })
	if _, err := e.kube.CoreV1().Secrets("default").Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "one"},
		StringData: map[string]string{"password": "plaintext-one"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "open"},
		Data: map[string]string{"visible": "plaintext-cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw := etcdGet(t, endpoint, "/registry/secrets/default/one")
	if !strings.HasPrefix(raw, "k8s:enc:aescbc:v1:key1:") || strings.Contains(raw, "plaintext-one") || strings.Contains(raw, "password") {
		t.Fatalf("etcd holds %q", raw)
	}
	if raw := etcdGet(t, endpoint, "/registry/configmaps/default/open"); !strings.Contains(raw, "plaintext-cm") {
		t.Fatalf("a ConfigMap was encrypted: %q", raw)
	}
	// A rotation: key2 writes, key1 still reads.
	_ = e.srv.Close()
	rotated := config("key2", "key1")
	e = start(t, func(c *server.Config) { c.EtcdServers = []string{endpoint}; c.EncryptionProviderConfig = rotated })
	one, err := e.kube.CoreV1().Secrets("default").Get(e.ctx, "one", metav1.GetOptions{})
	if err != nil || string(one.Data["password"]) != "plaintext-one" {
		t.Fatalf("the old secret after a rotation: %v %+v", err, one)
	}
	if _, err := e.kube.CoreV1().Secrets("default").Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "two"},
		StringData: map[string]string{"password": "plaintext-two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if raw := etcdGet(t, endpoint, "/registry/secrets/default/two"); !strings.HasPrefix(raw, "k8s:enc:aescbc:v1:key2:") || strings.Contains(raw, "plaintext-two") {
		t.Fatalf("etcd holds %q", raw)
	}
	// Lists and watches read them too.
	list, err := e.kube.CoreV1().Secrets("default").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v %d", err, len(list.Items))
	}
	// A configuration that lost the key cannot read the secret: an error,
	// never ciphertext passed off as data.
	_ = e.srv.Close()
	e = start(t, func(c *server.Config) {
		c.EtcdServers = []string{endpoint}
		c.EncryptionProviderConfig = config("key3")
	})
	if _, err := e.kube.CoreV1().Secrets("default").Get(e.ctx, "two", metav1.GetOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("a secret of a lost key: %v", err)
	}
}

func TestServiceAccountsAndTokens(t *testing.T) {
	e := start(t)
	ctx := e.ctx
	// Every namespace gets a default ServiceAccount and the CA bundle.
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, saErr := e.kube.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		cm, cmErr := e.kube.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return saErr == nil && cmErr == nil && cm.Data["ca.crt"] == string(e.srv.CACert()), nil
	})
	if err != nil {
		t.Fatal("no default ServiceAccount or kube-root-ca.crt in a new namespace")
	}
	sas := e.kube.CoreV1().ServiceAccounts("team")
	sa, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A token, as `kubectl create token` asks for it (protobuf body).
	tr, err := sas.CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil || tr.Status.Token == "" || tr.UID != sa.UID || kptr.Deref(tr.Spec.ExpirationSeconds, 0) != 3600 ||
		len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != "https://kubernetes.default.svc.cluster.local" {
		t.Fatalf("token request: %v %+v", err, tr)
	}
	if d := time.Until(tr.Status.ExpirationTimestamp.Time); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("expires in %v", d)
	}
	as := func(token string) *kubernetes.Clientset {
		cfg := rest.AnonymousClientConfig(e.cfg)
		cfg.BearerToken = token
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// It authenticates as the ServiceAccount.
	who, err := as(tr.Status.Token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "system:serviceaccount:team:bot" || who.Status.UserInfo.UID != string(sa.UID) ||
		strings.Join(who.Status.UserInfo.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:team,system:authenticated" {
		t.Fatalf("whoami: %v %+v", err, who)
	}
	// It has no rights of its own; a RoleBinding to edit gives it the
	// namespace's ConfigMaps and Secrets, view only the ConfigMaps.
	if _, err := as(tr.Status.Token).CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) ||
		err.Error() != `configmaps is forbidden: User "system:serviceaccount:team:bot" cannot list resource "configmaps" in API group "" in the namespace "team"` {
		t.Fatalf("no rights: %v", err)
	}
	bind := func(name, role string) {
		if _, err := e.kube.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "team"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bot := as(tr.Status.Token)
	bind("view", "view")
	waitAllowed(t, func() error { _, err := bot.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{}); return err })
	if _, err := bot.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("view reads Secrets: %v", err)
	}
	bind("edit", "edit")
	waitAllowed(t, func() error { _, err := bot.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); return err })
	waitAllowed(t, func() error {
		_, err := bot.CoreV1().ServiceAccounts("team").CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		return err
	})

	// Bad requests, as Kubernetes answers them.
	_, err = sas.CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: kptr.To(int64(300))}}, metav1.CreateOptions{})
	expectInvalid(t, err, `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes`,
		"spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes")
	if _, err := sas.CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) || err.Error() != `serviceaccounts "nobody" not found` {
		t.Fatalf("missing account: %v", err)
	}
	_, err = sas.CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "x"}}}, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || err.Error() != "cannot bind token to object of type /v1, Kind=ConfigMap" {
		t.Fatalf("bound to a ConfigMap: %v", err)
	}
	// A token for another audience does not authenticate here (401).
	vault, err := sas.CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as(vault.Status.Token).CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("another audience: %v", err)
	}
	// A token bound to a Secret stops working when the Secret goes; one
	// of a deleted ServiceAccount too.
	secret, err := e.kube.CoreV1().Secrets("team").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "anchor"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound, err := sas.CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "anchor", UID: secret.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as(bound.Status.Token).CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("bound token: %v", err)
	}
	if err := e.kube.CoreV1().Secrets("team").Delete(ctx, "anchor", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyUnauthorized(t, func() error {
		_, err := as(bound.Status.Token).CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{})
		return err
	})
	if err := sas.Delete(ctx, "bot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyUnauthorized(t, func() error { _, err := bot.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{}); return err })

	// Others can verify the tokens: the OIDC discovery document and keys,
	// readable by every ServiceAccount.
	r := e.do("GET", "/.well-known/openid-configuration", "")
	if r.code != 200 || !contains(r.body, `"issuer":"https://kubernetes.default.svc.cluster.local"`) || !contains(r.body, `"jwks_uri":"`+e.srv.URL()+`/openid/v1/jwks"`) {
		t.Fatalf("openid configuration: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/openid/v1/jwks", ""); r.code != 200 || !contains(r.body, `"kty":"EC"`) || r.header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("jwks: %d %s", r.code, r.body)
	}
	other, err := e.kube.CoreV1().ServiceAccounts("team").CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as(other.Status.Token).Discovery().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx); err != nil {
		t.Fatalf("a ServiceAccount reads the keys: %v", err)
	}
}

func waitAllowed(t *testing.T, f func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}) != nil {
		t.Fatalf("still refused: %v", last)
	}
}

func eventuallyUnauthorized(t *testing.T, f func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = f()
		return apierrors.IsUnauthorized(last), nil
	}) != nil {
		t.Fatalf("still accepted: %v", last)
	}
}

func TestEvents(t *testing.T) {
	e := start(t, func(c *server.Config) { c.EventTTL = 2 * time.Second })
	ctx := e.ctx
	core := e.kube.CoreV1().Events("default")
	modern := e.kube.EventsV1().Events("default")
	// Written through core v1, read through both.
	if _, err := core.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Name: "c", Namespace: "default"},
		Reason:         "Hello", Message: "m", Type: "Normal", Source: corev1.EventSource{Component: "me"}, Count: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := modern.Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil || got.Note != "m" || got.Regarding.Name != "c" || got.DeprecatedSource.Component != "me" || got.DeprecatedCount != 1 {
		t.Fatalf("through events.k8s.io: %v %+v", err, got)
	}
	// Written through events.k8s.io/v1, strictly validated.
	_, err = modern.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Reason: "R", Type: "Bogus"}, metav1.CreateOptions{})
	// (Without eventTime the reporting fields are not checked, as on
	// Kubernetes.)
	expectInvalid(t, err, `Event "bad" is invalid: [eventTime: Required value, type: Invalid value: "": has invalid value: Bogus]`,
		"eventTime: Required value", `type: Invalid value: "": has invalid value: Bogus`)
	if _, err := modern.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "modern"}, EventTime: metav1.NewMicroTime(time.Now()),
		Regarding: corev1.ObjectReference{Kind: "Secret", Name: "s", Namespace: "default"}, Reason: "R", Note: "n", Type: "Warning",
		ReportingController: "example.com/ctl", ReportingInstance: "i", Action: "Do"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Field selectors of each API, as kubectl describe sends them.
	l, err := core.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Secret,involvedObject.name=s,source=example.com/ctl"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "modern" || l.Items[0].Message != "n" {
		t.Fatalf("core field selector: %v %+v", err, l)
	}
	ml, err := modern.List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=ConfigMap,reportingController="})
	if err != nil || len(ml.Items) != 1 || ml.Items[0].Name != "legacy" {
		t.Fatalf("events.k8s.io field selector: %v %+v", err, ml)
	}
	if _, err := core.List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Secret"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: regarding.kind") {
		t.Fatalf("a label of the other API: %v", err)
	}
	// kubectl get events.
	r := e.do("GET", "/api/v1/namespaces/default/events", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"configmap/c"`) || !contains(r.body, `"secret/s"`) || !contains(r.body, `"name":"Last Seen"`) {
		t.Fatalf("table: %s", r.body)
	}
	// Events go after the TTL (a few seconds more: etcd leases are shared
	// and expire on etcd's clock).
	w, err := core.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := core.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		t.Fatal("Events outlived their TTL")
	}
	deleted := 0
	for deleted < 2 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == "DELETED" {
				deleted++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d DELETED events from the TTL", deleted)
		}
	}
	// Namespace deletion covers them (and every other core type).
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ConfigMaps("gone").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Secrets("gone").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Namespaces().Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the namespace was not emptied")
	}
	if r := e.do("GET", "/api/v1/namespaces/gone/configmaps/c", ""); r.code != http.StatusNotFound {
		t.Fatalf("a ConfigMap outlived its namespace: %d", r.code)
	}
}
