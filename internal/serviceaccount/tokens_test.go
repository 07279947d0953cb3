package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// objects is a Getter over fixed objects.
type objects map[string]*Object

func (o objects) get(kind, ns, name string) (*Object, error) {
	if obj, ok := o[kind+"/"+ns+"/"+name]; ok {
		return obj, nil
	}
	return nil, errors.New(kind + " " + name + " not found")
}

func (o objects) ServiceAccount(_ context.Context, ns, name string) (*Object, error) {
	return o.get("sa", ns, name)
}

func (o objects) Secret(_ context.Context, ns, name string) (*Object, error) {
	return o.get("secret", ns, name)
}

func newTokens(t *testing.T, signer crypto.Signer, objs objects, opts ...func(*Options)) *Tokens {
	t.Helper()
	o := Options{Signer: signer, Objects: objs}
	for _, f := range opts {
		f(&o)
	}
	tok, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ecKey(t *testing.T) crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIssueAndAuthenticate(t *testing.T) {
	objs := objects{"sa/ns/bot": {UID: "sa-uid"}, "secret/ns/s": {UID: "secret-uid"}}
	tok := newTokens(t, ecKey(t), objs)
	ctx := context.Background()
	now := time.Now()
	token, err := tok.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "sa-uid"}, Audiences: tok.Audiences(), Expiration: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// The claims Kubernetes writes.
	c := claims(t, token)
	k8s, _ := c["kubernetes.io"].(map[string]any)
	sa, _ := k8s["serviceaccount"].(map[string]any)
	if c["iss"] != DefaultIssuer || c["sub"] != "system:serviceaccount:ns:bot" || k8s["namespace"] != "ns" || sa["name"] != "bot" || sa["uid"] != "sa-uid" || c["jti"] == "" {
		t.Fatalf("claims %v", c)
	}
	if auds, ok := c["aud"].([]any); !ok || len(auds) != 1 || auds[0] != DefaultIssuer {
		t.Fatalf("aud %#v (a list, as Kubernetes writes it)", c["aud"])
	}
	if exp := int64(c["exp"].(float64)); exp != now.Add(time.Hour).Unix() {
		t.Fatalf("exp %d", exp)
	}
	resp, ok, err := tok.AuthenticateToken(ctx, token)
	if err != nil || !ok {
		t.Fatalf("authenticate: %v %v", ok, err)
	}
	u := resp.User
	if u.GetName() != "system:serviceaccount:ns:bot" || u.GetUID() != "sa-uid" ||
		strings.Join(u.GetGroups(), ",") != "system:serviceaccounts,system:serviceaccounts:ns" ||
		!strings.HasPrefix(u.GetExtra()["authentication.kubernetes.io/credential-id"][0], "JTI=") {
		t.Fatalf("user %+v", u)
	}

	// A token bound to a Secret lives as long as the Secret.
	bound, _ := tok.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "sa-uid"}, Secret: &Ref{Name: "s", UID: "secret-uid"},
		Audiences: tok.Audiences(), Expiration: time.Hour, Now: now})
	if _, ok, err := tok.AuthenticateToken(ctx, bound); !ok || err != nil {
		t.Fatalf("bound: %v %v", ok, err)
	}
	objs["secret/ns/s"] = &Object{UID: "another"}
	if _, _, err := tok.AuthenticateToken(ctx, bound); err == nil || err.Error() != "secret UID (another) does not match service account secret ref claim (secret-uid)" {
		t.Fatalf("recreated secret: %v", err)
	}
	delete(objs, "secret/ns/s")
	if _, _, err := tok.AuthenticateToken(ctx, bound); err == nil || err.Error() != "service account token has been invalidated" {
		t.Fatalf("deleted secret: %v", err)
	}
}

func TestRefusedTokens(t *testing.T) {
	objs := objects{"sa/ns/bot": {UID: "sa-uid"}}
	key := ecKey(t)
	tok := newTokens(t, key, objs)
	ctx := context.Background()
	issue := func(r Request) string {
		t.Helper()
		if r.Namespace == "" {
			r.Namespace, r.ServiceAccount = "ns", Ref{Name: "bot", UID: "sa-uid"}
		}
		if r.Audiences == nil {
			r.Audiences = tok.Audiences()
		}
		if r.Expiration == 0 {
			r.Expiration = time.Hour
		}
		if r.Now.IsZero() {
			r.Now = time.Now()
		}
		s, err := tok.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	deleted := time.Now().Add(-time.Hour)
	other := newTokens(t, ecKey(t), objs)
	otherToken, _ := other.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "sa-uid"}, Audiences: tok.Audiences(), Expiration: time.Hour, Now: time.Now()})
	// Another key of another algorithm (RS256, where ours is ES256): a
	// token of ours that no key of ours signed either way.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherAlgToken, _ := newTokens(t, rsaKey, objs).Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "sa-uid"}, Audiences: tok.Audiences(), Expiration: time.Hour, Now: time.Now()})
	foreign := newTokens(t, key, objs, func(o *Options) { o.Issuers = []string{"https://elsewhere.example"} })
	foreignToken, _ := foreign.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "sa-uid"}, Audiences: tok.Audiences(), Expiration: time.Hour, Now: time.Now()})
	for _, c := range []struct {
		name, token, err string
		setup            func()
	}{
		{name: "expired", token: issue(Request{Now: time.Now().Add(-2 * time.Hour)}), err: "service account token has expired"},
		{name: "not valid yet", token: issue(Request{Now: time.Now().Add(2 * time.Hour)}), err: "service account token is not valid yet"},
		{name: "other audience", token: issue(Request{Audiences: []string{"vault"}}), err: `token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]`},
		{name: "recreated service account", token: issue(Request{}), setup: func() { objs["sa/ns/bot"] = &Object{UID: "new"} }, err: "service account UID (new) does not match claim (sa-uid)"},
		{name: "deleted service account", token: issue(Request{}), setup: func() { objs["sa/ns/bot"] = &Object{UID: "sa-uid", Deleted: &deleted} }, err: "service account ns/bot has been deleted"},
		{name: "another key", token: otherToken, err: "invalid signature, no keys found"},
		{name: "another key and algorithm", token: otherAlgToken, err: "invalid signature, no keys found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs["sa/ns/bot"] = &Object{UID: "sa-uid"}
			if c.setup != nil {
				c.setup()
			}
			_, ok, err := tok.AuthenticateToken(ctx, c.token)
			if ok || err == nil || err.Error() != c.err {
				t.Fatalf("got %v %v, want %q", ok, err, c.err)
			}
		})
	}
	// Tokens of another issuer, and what is no JWT, are left to other
	// authenticators.
	for _, s := range []string{foreignToken, "abc", "a.b.c", `{"iss":"x"}`} {
		if resp, ok, err := tok.AuthenticateToken(ctx, s); ok || err != nil || resp != nil {
			t.Fatalf("%q: %v %v", s, ok, err)
		}
	}
	// A token for a chosen audience authenticates where that audience is
	// asked for.
	vault := issue(Request{Audiences: []string{"vault"}})
	if _, ok, err := tok.AuthenticateToken(authenticator.WithAudiences(ctx, authenticator.Audiences{"vault"}), vault); !ok || err != nil {
		t.Fatalf("vault audience: %v %v", ok, err)
	}
}

// Keys given as PublicKeys verify tokens too (another replica's key, or
// one being rotated out), and both sign with Kubernetes' key IDs.
func TestRotationAndKeyIDs(t *testing.T) {
	objs := objects{"sa/ns/bot": {UID: "u"}}
	oldKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	old := newTokens(t, oldKey, objs)
	token, _ := old.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "bot", UID: "u"}, Audiences: old.Audiences(), Expiration: time.Hour, Now: time.Now()})
	if h := strings.Split(token, ".")[0]; !strings.Contains(string(mustDecode(t, h)), `"alg":"RS256"`) {
		t.Fatalf("header %s", mustDecode(t, h))
	}
	cur := newTokens(t, ecKey(t), objs, func(o *Options) { o.PublicKeys = []crypto.PublicKey{oldKey.Public()} })
	if _, ok, err := cur.AuthenticateToken(context.Background(), token); !ok || err != nil {
		t.Fatalf("old key's token: %v %v", ok, err)
	}
	// The JWKS lists both keys with their key IDs.
	_, jwks, err := cur.Discovery("https://127.0.0.1:6443/openid/v1/jwks")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	jwks.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, JWKSPath, nil))
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("jwks %s %v", rec.Body, err)
	}
	oldID, _ := KeyID(oldKey.Public())
	if set.Keys[1].KeyID != oldID || set.Keys[1].Algorithm != "RS256" || set.Keys[0].Algorithm != "ES256" {
		t.Fatalf("keys %+v", set.Keys)
	}
	if rec.Header().Get("Content-Type") != "application/jwk-set+json" || rec.Header().Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("headers %v", rec.Header())
	}
}

func mustDecode(t *testing.T, s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDiscoveryDocument(t *testing.T) {
	tok := newTokens(t, ecKey(t), objects{}, func(o *Options) { o.Issuers = []string{"https://issuer.example", "https://old.example"} })
	cfg, _, err := tok.Discovery("https://127.0.0.1:6443/openid/v1/jwks")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	cfg.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, OpenIDConfigPath, nil))
	want := `{"issuer":"https://issuer.example","jwks_uri":"https://127.0.0.1:6443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}`
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("document %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	cfg.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, OpenIDConfigPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
}
