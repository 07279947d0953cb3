package auth

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"
)

// JWTOptions configure the JWT (OpenID Connect) token authenticators of
// an AuthenticationConfiguration, from a file (kube-apiserver's
// --authentication-config) or from the --oidc-* flags.
type JWTOptions struct {
	// Config holds the issuers (its JWT); it was validated
	// (ValidateAuthenticationConfig).
	Config *apiserver.AuthenticationConfiguration
	// File, when set, is the file Config was read from, with contents
	// Data: it is watched, and a valid new configuration replaces the
	// issuers as kube-apiserver's reload does.
	File, Data string
	// ReloadInterval is how often File is read again besides the file
	// system's change notifications (default one minute, as
	// kube-apiserver's).
	ReloadInterval time.Duration
	// SigningAlgs are the accepted signing algorithms (nil: every one the
	// OIDC authenticator knows, as for a configuration file).
	SigningAlgs []string
	// DisallowedIssuers are the ServiceAccount token issuers.
	DisallowedIssuers []string
	// Log receives the reloads and their failures.
	Log *slog.Logger
}

// jwtAuthenticator is one configuration's JWT authenticators, which stop
// (key set refreshes) with cancel.
type jwtAuthenticator struct {
	token       authenticator.Token
	healthCheck func() error
	cancel      func()
}

// newJWTAuthenticator builds the issuers of a configuration with the OIDC
// authenticator, as kube-apiserver does: the first issuer to claim a
// token decides, and tokens are for the server's audiences. Their key sets
// are fetched in the background until lifecycle ends.
func newJWTAuthenticator(lifecycle context.Context, c *apiserver.AuthenticationConfiguration, algs []string, apiAudiences authenticator.Audiences, disallowedIssuers []string) (_ *jwtAuthenticator, err error) {
	ctx, cancel := context.WithCancel(lifecycle)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	if algs == nil {
		algs = oidc.AllValidSigningAlgorithms()
	}
	var tokens []authenticator.Token
	var checks []func() error
	for _, j := range c.JWT {
		var ca oidc.CAContentProvider
		if len(j.Issuer.CertificateAuthority) > 0 {
			if ca, err = dynamiccertificates.NewStaticCAContent("oidc-authenticator", []byte(j.Issuer.CertificateAuthority)); err != nil {
				return nil, err
			}
		}
		a, err := oidc.New(ctx, oidc.Options{JWTAuthenticator: j, CAContentProvider: ca, SupportedSigningAlgs: algs, DisallowedIssuers: disallowedIssuers})
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, a)
		checks = append(checks, a.HealthCheck)
	}
	return &jwtAuthenticator{
		token: authenticator.WrapAudienceAgnosticToken(apiAudiences, tokenunion.NewFailOnError(tokens...)),
		healthCheck: func() error {
			var errs []error
			for _, check := range checks {
				if err := check(); err != nil {
					errs = append(errs, err)
				}
			}
			return utilerrors.NewAggregate(errs)
		},
		cancel: cancel,
	}, nil
}

// reloadableJWT authenticates tokens with the current configuration's
// JWT authenticators.
type reloadableJWT struct {
	lifecycle         context.Context
	algs              []string
	apiAudiences      authenticator.Audiences
	disallowedIssuers []string
	log               *slog.Logger
	cur               atomic.Pointer[jwtAuthenticator]
}

func newReloadableJWT(lifecycle context.Context, o JWTOptions, apiAudiences []string) (*reloadableJWT, error) {
	r := &reloadableJWT{lifecycle: lifecycle, algs: o.SigningAlgs, apiAudiences: apiAudiences, disallowedIssuers: o.DisallowedIssuers, log: o.Log}
	if r.log == nil {
		r.log = slog.Default()
	}
	a, err := newJWTAuthenticator(lifecycle, o.Config, r.algs, r.apiAudiences, r.disallowedIssuers)
	if err != nil {
		return nil, err
	}
	r.cur.Store(a)
	return r, nil
}

func (r *reloadableJWT) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return r.cur.Load().token.AuthenticateToken(ctx, token)
}

// jwtHealthPoll is how often a new configuration's issuers are checked
// until all have their discovery documents and keys, as kube-apiserver
// checks them.
const jwtHealthPoll = 10 * time.Second

// update replaces the JWT authenticators with a configuration's once all
// its issuers are reachable (within ctx); the old ones stop a minute
// later, when requests that were using them are done.
func (r *reloadableJWT) update(ctx context.Context, c *apiserver.AuthenticationConfiguration) error {
	a, err := newJWTAuthenticator(r.lifecycle, c, r.algs, r.apiAudiences, r.disallowedIssuers)
	if err != nil {
		return err
	}
	var last error
	if waitErr := wait.PollUntilContextCancel(ctx, jwtHealthPoll, true, func(context.Context) (bool, error) {
		last = a.healthCheck()
		return last == nil, nil
	}); last != nil || waitErr != nil {
		a.cancel()
		return utilerrors.NewAggregate([]error{last, waitErr})
	}
	old := r.cur.Swap(a)
	go func() {
		t := time.NewTimer(time.Minute)
		defer t.Stop()
		select {
		case <-r.lifecycle.Done():
		case <-t.C:
		}
		old.cancel()
	}()
	return nil
}
