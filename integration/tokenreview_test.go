package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

const defaultAudience = "https://kubernetes.default.svc.cluster.local"

// TestTokenReview reviews ServiceAccount and static tokens through
// client-go as a delegating server (a webhook's, a metrics endpoint's)
// does, with kube-apiserver's answers for each case.
func TestTokenReview(t *testing.T) {
	e := start(t, func(c *server.Config) { c.TokenAuthFile = writeTokens(t) })
	ctx := e.ctx
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sas := e.kube.CoreV1().ServiceAccounts("team")
	token := func(name string, audiences ...string) (*corev1.ServiceAccount, string) {
		t.Helper()
		sa, err := sas.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sa, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		tr, err := sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sa, tr.Status.Token
	}
	as := func(token string) kubernetes.Interface {
		cfg := rest.AnonymousClientConfig(e.cfg)
		cfg.BearerToken = token
		return kubernetes.NewForConfigOrDie(cfg)
	}

	// The reviewer may create TokenReviews once bound to
	// system:auth-delegator, and not before.
	_, reviewerToken := token("reviewer")
	reviews := as(reviewerToken).AuthenticationV1().TokenReviews()
	_, bot := token("bot")
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bot}}
	if _, err := reviews.Create(ctx, review, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		err.Error() != `tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:team:reviewer" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope` {
		t.Fatalf("unbound reviewer: %v", err)
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "reviewer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *authenticationv1.TokenReview
	waitAllowed(t, func() (err error) { got, err = reviews.Create(ctx, review, metav1.CreateOptions{}); return err })

	// A valid token: the ServiceAccount, its groups, the token's
	// credential id, and the server's audience it was checked against.
	botSA, _ := token("bot")
	u := got.Status.User
	if !got.Status.Authenticated || got.Status.Error != "" || u.Username != "system:serviceaccount:team:bot" || u.UID != string(botSA.UID) ||
		strings.Join(u.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:team,system:authenticated" ||
		len(u.Extra) != 1 || len(u.Extra["authentication.kubernetes.io/credential-id"]) != 1 ||
		!strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "JTI=") ||
		!slices.Equal(got.Status.Audiences, []string{defaultAudience}) || got.Spec.Token != bot {
		t.Fatalf("valid token: %+v", got)
	}
	check := func(what string, spec authenticationv1.TokenReviewSpec, wantAuds []string, wantErr string) *authenticationv1.TokenReview {
		t.Helper()
		got, err := reviews.Create(ctx, &authenticationv1.TokenReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Status.Authenticated != (wantErr == "") || got.Status.Error != wantErr || !slices.Equal(got.Status.Audiences, wantAuds) {
			t.Fatalf("%s: authenticated %v, error %q, audiences %q; want error %q, audiences %q", what,
				got.Status.Authenticated, got.Status.Error, got.Status.Audiences, wantErr, wantAuds)
		}
		if wantErr != "" && (got.Status.User.Username != "" || len(got.Status.User.Groups) != 0) {
			t.Fatalf("%s: a user for a token that does not authenticate: %+v", what, got.Status.User)
		}
		return got
	}

	// Audiences: the review's, else the server's; the token must be for
	// one of them, and the answer says which.
	_, vault := token("bot", "vault", "other")
	check("the token's audience asked for", authenticationv1.TokenReviewSpec{Token: vault, Audiences: []string{"vault", "elsewhere"}}, []string{"vault"}, "")
	check("another audience's token", authenticationv1.TokenReviewSpec{Token: vault},
		nil, `[invalid bearer token, token audiences ["vault" "other"] is invalid for the target audiences ["`+defaultAudience+`"]]`)
	check("a server token for another audience", authenticationv1.TokenReviewSpec{Token: bot, Audiences: []string{"vault"}},
		nil, `[invalid bearer token, token audiences ["`+defaultAudience+`"] is invalid for the target audiences ["vault"]]`)

	// A token whose signature was tampered with, and one that is no JWT.
	check("a tampered signature", authenticationv1.TokenReviewSpec{Token: bot[:len(bot)-4] + "AAAA"},
		nil, "[invalid bearer token, go-jose/go-jose: error in cryptographic primitive]")
	check("not a token", authenticationv1.TokenReviewSpec{Token: "abc"}, nil, "invalid bearer token")

	// A static token is good for the server's audiences only.
	jane := check("a static token", authenticationv1.TokenReviewSpec{Token: "jane-token"}, []string{defaultAudience}, "")
	if u := jane.Status.User; u.Username != "jane" || u.UID != "1001" || strings.Join(u.Groups, ",") != "devs,qa,system:authenticated" {
		t.Fatalf("static token: %+v", u)
	}
	check("a static token for another audience", authenticationv1.TokenReviewSpec{Token: "jane-token", Audiences: []string{"vault"}}, nil, "invalid bearer token")

	// A token of a ServiceAccount that was deleted (and made again: a new
	// UID) stops authenticating.
	goneSA, gone := token("gone")
	check("before the deletion", authenticationv1.TokenReviewSpec{Token: gone}, []string{defaultAudience}, "")
	if err := sas.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *authenticationv1.TokenReview
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		last, err = reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: gone}}, metav1.CreateOptions{})
		return err == nil && !last.Status.Authenticated, err
	}); err != nil {
		t.Fatalf("deleted account: %v %+v", err, last)
	}
	if last.Status.Error != `[invalid bearer token, serviceaccounts "gone" not found]` {
		t.Fatalf("deleted account: %q", last.Status.Error)
	}
	againSA, _ := token("gone")
	check("an account made again", authenticationv1.TokenReviewSpec{Token: gone},
		nil, "[invalid bearer token, service account UID ("+string(againSA.UID)+") does not match claim ("+string(goneSA.UID)+")]")

	// A review without a token is a bad request.
	if _, err := reviews.Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) ||
		err.Error() != "token is required for TokenReview in authentication" {
		t.Fatalf("no token: %v", err)
	}
}

// TestTokenReviewRequests checks TokenReview's discovery and the answers
// to bodies and paths it does not take, as kube-apiserver gives them.
func TestTokenReviewRequests(t *testing.T) {
	e := start(t)
	list, err := e.kube.Discovery().ServerResourcesForGroupVersion("authentication.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
		if r.Name == "tokenreviews" && (r.Kind != "TokenReview" || r.Namespaced || r.SingularName != "tokenreview" || !slices.Equal(r.Verbs, []string{"create"})) {
			t.Errorf("discovery: %+v", r)
		}
	}
	if !slices.Equal(names, []string{"selfsubjectreviews", "tokenreviews"}) {
		t.Errorf("authentication.k8s.io/v1 serves %v", names)
	}
	const path = "/apis/authentication.k8s.io/v1/tokenreviews"
	expectStatus(t, e.do("GET", path, ""), 405, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	expectStatus(t, e.do("GET", path+"?fieldSelector=metadata.name%3Dx", ""), 405, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	for method, want := range map[string]string{
		"GET " + path:         `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}`,
		"POST " + path + "/x": `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`,
	} {
		m, p, _ := strings.Cut(method, " ")
		if r := e.do(m, p, `{"spec":{"token":"abc"}}`); compact(string(r.body)) != want {
			t.Errorf("%s: %d %s", method, r.code, r.body)
		}
	}
	expectStatus(t, e.do("POST", path+"/x", `{"spec":{"token":"abc"}}`), 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	expectStatus(t, e.do("POST", "/apis/authentication.k8s.io/v1/namespaces/default/tokenreviews", `{"spec":{"token":"abc"}}`), 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	for _, c := range []struct{ query, body, msg string }{
		{"", `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{}}`, "token is required for TokenReview in authentication"},
		{"", `notjson`, `the object provided is unrecognized (must be of type TokenReview): couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u') (6e6f746a736f6e)`},
		{"", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","spec":{"token":"abc"}}`,
			`SelfSubjectReview in version "v1" cannot be handled as a TokenReview: converting (v1.SelfSubjectReview) to (authentication.TokenReview): unknown conversion`},
		{"", `{"apiVersion":"authentication.k8s.io/v1","kind":"Foo","spec":{"token":"abc"}}`,
			`Foo in version "v1" cannot be handled as a TokenReview: no kind "Foo" is registered for version "authentication.k8s.io/v1" in scheme "pkg/runtime/scheme.go:111"`},
		{"", `{"apiVersion":"authentication.k8s.io/v1beta1","kind":"TokenReview","spec":{"token":"abc"}}`,
			`the API version in the data (authentication.k8s.io/v1beta1) does not match the expected API version (authentication.k8s.io/v1)`},
		{"", `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":5}}`,
			`TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot unmarshal number into Go struct field TokenReviewSpec.spec.token of type string`},
		{"?fieldValidation=Strict", `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"abc","bogus":1,"token":"x"}}`,
			`TokenReview in version "v1" cannot be handled as a TokenReview: strict decoding error: unknown field "spec.bogus", duplicate field "spec.token"`},
	} {
		expectStatus(t, e.do("POST", path+c.query, c.body), 400, metav1.StatusReasonBadRequest, c.msg)
	}
	// Unknown fields are warnings by default; the namespace of a
	// cluster-scoped object is dropped; a token that does not authenticate
	// keeps what the body said of its user.
	r := e.do("POST", path, `{"metadata":{"name":"x","namespace":"ns"},"spec":{"token":"abc","bogus":1},"status":{"authenticated":true,"user":{"username":"x"}}}`)
	if r.code != 201 || !slices.Contains(r.header.Values("Warning"), `299 - "unknown field \"spec.bogus\""`) ||
		compact(string(r.body)) != `{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","metadata":{"name":"x"},"spec":{"token":"abc"},"status":{"user":{"username":"x"},"error":"invalid bearer token"}}` {
		t.Fatalf("lax body: %d %v %s", r.code, r.header, r.body)
	}
}

// TestTokenReviewInsecure reviews tokens on a plain HTTP server too,
// where requests themselves are trusted without credentials.
func TestTokenReviewInsecure(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Insecure = true })
	ctx := e.ctx
	if _, err := e.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil || !got.Status.Authenticated || got.Status.User.Username != "system:serviceaccount:default:bot" || !slices.Equal(got.Status.Audiences, []string{defaultAudience}) {
		t.Fatalf("review: %v %+v", err, got)
	}
	// In protobuf, as clients that prefer it send and read it.
	pcfg := rest.CopyConfig(e.cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	got, err = kubernetes.NewForConfigOrDie(pcfg).AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "abc"}}, metav1.CreateOptions{})
	if err != nil || got.Status.Authenticated || got.Status.Error != "invalid bearer token" || got.Spec.Token != "abc" {
		t.Fatalf("review of no token: %v %+v", err, got)
	}
}
