package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"

	"github.com/crdserver/crdserver/internal/request"
)

// Options say how requests are authenticated.
type Options struct {
	// ClientCAs verify client certificates; nil turns them off.
	ClientCAs *x509.CertPool
	// TokenFile is a Kubernetes static token file (CSV: token, user, uid,
	// "group1,group2"); empty turns bearer tokens off.
	TokenFile string
	// Tokens are more bearer token authenticators (ServiceAccount tokens).
	Tokens []authenticator.Token
	// APIAudiences are the server's audiences: a static token is good for
	// them only, and a TokenReview that names no audiences checks tokens
	// against them.
	APIAudiences []string
	// Anonymous lets requests without credentials in as system:anonymous
	// (group system:unauthenticated).
	Anonymous bool
	// AnonymousConditions, when Anonymous, limit anonymous requests to
	// the paths they name (an AuthenticationConfiguration's anonymous
	// section); none: every path.
	AnonymousConditions []apiserver.AnonymousAuthCondition
	// Insecure trusts every request as Unsecured (plain HTTP).
	Insecure bool
	// RequestHeader is front-proxy authentication; nil turns it off.
	RequestHeader *RequestHeaderOptions
	// JWT are the JWT (OpenID Connect) issuers, after the ServiceAccount
	// tokens; nil turns them off.
	JWT *JWTOptions
	// TokenWebhook is a token authentication webhook, last of the token
	// authenticators; nil turns it off.
	TokenWebhook *TokenWebhookOptions
	// Context bounds the background work of the JWT authenticators (key
	// set refreshes, the configuration file's reloads); default: none.
	Context context.Context
}

// RequestHeaderOptions say which front proxies may name the user in
// request headers, and in which.
type RequestHeaderOptions struct {
	// CAs verify the proxies' client certificates; AllowedNames, when
	// not empty, are the common names they may have.
	CAs                                                                          *x509.CertPool
	AllowedNames, UsernameHeaders, UIDHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}

// Authenticator finds the user of a request.
type Authenticator struct {
	insecure bool
	req      authenticator.Request
	// review authenticates the tokens of TokenReviews.
	review    authenticator.Request
	audiences []string
}

// NewAuthenticator builds the authenticator Options describe, from
// Kubernetes' own authenticators, in kube-apiserver's order: front proxies'
// request headers, client certificates, then bearer tokens (the static
// token file, ServiceAccount tokens, JWT issuers, the token webhook), then
// anonymous.
func NewAuthenticator(o Options) (*Authenticator, error) {
	var chain []authenticator.Request
	if rh := o.RequestHeader; rh != nil {
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = rh.CAs
		verify := func() (x509.VerifyOptions, bool) { return opts, true }
		chain = append(chain, authenticator.WrapAudienceAgnosticRequest(o.APIAudiences, headerrequest.NewDynamicVerifyOptionsSecure(verify,
			headerrequest.StaticStringSlice(rh.AllowedNames), headerrequest.StaticStringSlice(rh.UsernameHeaders), headerrequest.StaticStringSlice(rh.UIDHeaders),
			headerrequest.StaticStringSlice(rh.GroupHeaders), headerrequest.StaticStringSlice(rh.ExtraHeaderPrefixes))))
	}
	if o.ClientCAs != nil {
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = o.ClientCAs
		chain = append(chain, newCachedCerts(x509request.New(opts, x509request.CommonNameUserConversion)))
	}
	var tokens []authenticator.Token
	if o.TokenFile != "" {
		t, err := tokenfile.NewCSV(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token auth file: %w", err)
		}
		tokens = append(tokens, authenticator.WrapAudienceAgnosticToken(o.APIAudiences, t))
	}
	tokens = append(tokens, o.Tokens...)
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if o.JWT != nil {
		// After the ServiceAccount tokens: both are JWTs, and the issuers
		// would fetch keys for every ServiceAccount token they do not know.
		jwt, err := newReloadableJWT(ctx, *o.JWT, o.APIAudiences)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, jwt)
		if o.JWT.File != "" {
			go watchAuthenticationConfig(ctx, *o.JWT, jwt)
		}
	}
	if o.TokenWebhook != nil {
		wh, err := newTokenWebhook(*o.TokenWebhook, o.APIAudiences)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, wh)
	}
	if len(tokens) > 0 {
		chain = append(chain, bearertoken.New(tokenunion.New(tokens...)))
	}
	// Authenticated users are also in system:authenticated.
	req := group.NewAuthenticatedGroupAdder(union.New(chain...))
	if o.Anonymous {
		// Bad credentials fail; none at all make an anonymous request.
		req = union.NewFailOnError(req, anonymous.NewAuthenticator(o.AnonymousConditions))
	}
	return &Authenticator{
		insecure: o.Insecure,
		req:      req,
		// kube-apiserver's chain starts with its loopback client's token
		// (a token file of one), which a reviewed token never is: a
		// TokenReview's error lists that authenticator's "invalid bearer
		// token" before the others' reasons. crdserver's own clients carry
		// no token; an empty token file is that first authenticator here.
		review:    union.New(bearertoken.New(tokenfile.New(nil)), req),
		audiences: o.APIAudiences,
	}, nil
}

// APIAudiences are the server's audiences.
func (a *Authenticator) APIAudiences() []string { return a.audiences }

// ReviewToken authenticates a bearer token for audiences as
// kube-apiserver's TokenReview does: as the credential of a request that
// carries nothing else. Empty audiences are the server's. It reports
// whether the token authenticates, and why not.
func (a *Authenticator) ReviewToken(ctx context.Context, token string, audiences []string) (*authenticator.Response, bool, error) {
	if len(audiences) == 0 {
		audiences = a.audiences
	}
	if len(audiences) > 0 {
		ctx = authenticator.WithAudiences(ctx, audiences)
	}
	r := (&http.Request{Header: http.Header{}}).WithContext(ctx)
	r.Header.Add("Authorization", "Bearer "+token)
	return a.review.AuthenticateRequest(r)
}

// WithAuthentication authenticates each request, answering 401 when it
// cannot, and hands on the user in the request's context. Requests that
// already carry a user (crdserver's in-process controllers) pass.
func WithAuthentication(next http.Handler, a *Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := UserFrom(r.Context()); ok {
			next.ServeHTTP(w, r)
			return
		}
		if a.insecure {
			next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), Unsecured)))
			return
		}
		resp, ok, err := a.req.AuthenticateRequest(r)
		if err != nil || !ok {
			request.WriteError(w, r, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		// The credentials go no further.
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), resp.User)))
	})
}
