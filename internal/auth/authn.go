package auth

import (
	"crypto/x509"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"

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
	// Anonymous lets requests without credentials in as system:anonymous
	// (group system:unauthenticated).
	Anonymous bool
	// Insecure trusts every request as Unsecured (plain HTTP).
	Insecure bool
}

// Authenticator finds the user of a request.
type Authenticator struct {
	insecure bool
	req      authenticator.Request
}

// NewAuthenticator builds the authenticator Options describe, from
// Kubernetes' own authenticators.
func NewAuthenticator(o Options) (*Authenticator, error) {
	if o.Insecure {
		return &Authenticator{insecure: true}, nil
	}
	var chain []authenticator.Request
	if o.ClientCAs != nil {
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = o.ClientCAs
		chain = append(chain, newCachedCerts(x509request.New(opts, x509request.CommonNameUserConversion)))
	}
	if o.TokenFile != "" {
		tokens, err := tokenfile.NewCSV(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token auth file: %w", err)
		}
		chain = append(chain, bearertoken.New(tokens))
	}
	for _, t := range o.Tokens {
		chain = append(chain, bearertoken.New(t))
	}
	// Authenticated users are also in system:authenticated.
	req := group.NewAuthenticatedGroupAdder(union.New(chain...))
	if o.Anonymous {
		// Bad credentials fail; none at all make an anonymous request.
		req = union.NewFailOnError(req, anonymous.NewAuthenticator(nil))
	}
	return &Authenticator{req: req}, nil
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
