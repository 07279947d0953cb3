package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/apiserver"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/serviceaccount"
)

// AuthenticationOptions are the token authenticators beyond the static
// token file and ServiceAccount tokens, configured as kube-apiserver's
// flags configure them: JWT (OpenID Connect) issuers from an
// AuthenticationConfiguration file or the --oidc-* flags, and a token
// authentication webhook.
type AuthenticationOptions struct {
	// ConfigFile is an apiserver.config.k8s.io AuthenticationConfiguration
	// (--authentication-config): its JWT issuers, and its anonymous
	// section, which replaces DisableAnonymous. It is read again when it
	// changes; a new file that is not valid is logged and the old
	// configuration stays. It excludes OIDC.
	ConfigFile string
	// ConfigReloadInterval is how often ConfigFile is read again besides
	// the file system's change notifications (default one minute).
	ConfigReloadInterval time.Duration
	// AnonymousFlagSet says the anonymous setting was given explicitly
	// (--anonymous-auth): ConfigFile may then have no anonymous section,
	// as kube-apiserver refuses both.
	AnonymousFlagSet bool
	// OIDC is one JWT issuer from kube-apiserver's --oidc-* flags.
	OIDC OIDCOptions
	// TokenWebhook is a token authentication webhook
	// (--authentication-token-webhook-*): off without its ConfigFile.
	TokenWebhook TokenWebhookOptions
}

// OIDCOptions are kube-apiserver's --oidc-* flags; IssuerURL and ClientID
// turn the issuer on.
type OIDCOptions struct {
	IssuerURL, ClientID string
	// CAFile verifies the issuer's serving certificate (default: the
	// host's roots).
	CAFile string
	// UsernameClaim is the claim of the user name (default "sub").
	UsernameClaim string
	// UsernamePrefix is put before user names; empty: "IssuerURL#" for
	// claims other than "email"; "-": none.
	UsernamePrefix string
	// GroupsClaim, when set, is the claim of the user's groups, each
	// prefixed with GroupsPrefix.
	GroupsClaim, GroupsPrefix string
	// RequiredClaims must be in tokens with these values.
	RequiredClaims map[string]string
	// SigningAlgs are the accepted signing algorithms (default RS256).
	SigningAlgs []string
}

// TokenWebhookOptions are kube-apiserver's --authentication-token-webhook-*
// flags.
type TokenWebhookOptions struct {
	// ConfigFile is the webhook's kubeconfig.
	ConfigFile string
	// Version is the authentication.k8s.io version of the TokenReviews
	// sent: v1beta1 (the default, as kube-apiserver's) or v1.
	Version string
	// CacheTTL is how long answers are kept (default 2 minutes; negative:
	// not at all).
	CacheTTL time.Duration
}

func (o OIDCOptions) flags() auth.OIDCFlags {
	return auth.OIDCFlags{IssuerURL: o.IssuerURL, ClientID: o.ClientID, CAFile: o.CAFile, UsernameClaim: o.UsernameClaim, UsernamePrefix: o.UsernamePrefix,
		GroupsClaim: o.GroupsClaim, GroupsPrefix: o.GroupsPrefix, RequiredClaims: o.RequiredClaims, SigningAlgs: o.SigningAlgs}
}

// applyAuthentication adds the JWT issuers, the token webhook and the
// anonymous configuration to the authenticator's options, with
// kube-apiserver's checks and messages.
func (cfg Config) applyAuthentication(ctx context.Context, opts *auth.Options) error {
	o := cfg.Authentication
	oidcFlags := o.OIDC.flags()
	issuers := cfg.ServiceAccounts.Issuers
	if len(issuers) == 0 {
		issuers = []string{serviceaccount.DefaultIssuer}
	}
	if o.ConfigFile != "" && oidcFlags.Set() {
		return errors.New("authentication-config file and oidc-* flags are mutually exclusive")
	}
	if o.ConfigFile == "" && oidcFlags.Set() && (o.OIDC.IssuerURL == "" || o.OIDC.ClientID == "") {
		return errors.New("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set")
	}
	jwt := &auth.JWTOptions{Config: &apiserver.AuthenticationConfiguration{}, DisallowedIssuers: issuers, Log: cfg.Logger}
	if o.ConfigFile != "" {
		c, data, err := auth.LoadAuthenticationConfig(o.ConfigFile)
		if err != nil {
			return fmt.Errorf("failed to load authentication configuration from file %q: %w", o.ConfigFile, err)
		}
		jwt.Config, jwt.File, jwt.Data, jwt.ReloadInterval = c, o.ConfigFile, data, o.ConfigReloadInterval
	} else if oidcFlags.Set() {
		j, err := oidcFlags.JWTAuthenticator()
		if err != nil {
			return err
		}
		jwt.Config.JWT = []apiserver.JWTAuthenticator{j}
		jwt.SigningAlgs = oidcFlags.OIDCSigningAlgs()
	}
	if a := jwt.Config.Anonymous; a != nil {
		if o.AnonymousFlagSet || cfg.DisableAnonymous {
			return field.Forbidden(field.NewPath("anonymous"), "--anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file")
		}
		opts.Anonymous, opts.AnonymousConditions = a.Enabled, a.Conditions
	}
	if err := auth.ValidateAuthenticationConfig(jwt.Config, issuers); err != nil {
		return fmt.Errorf("invalid authentication configuration: %w", err)
	}
	if len(jwt.Config.JWT) > 0 || jwt.File != "" {
		opts.JWT = jwt
	}
	if wh := o.TokenWebhook; wh.ConfigFile != "" {
		if wh.Version == "" {
			wh.Version = "v1beta1"
		}
		switch {
		case wh.CacheTTL == 0:
			wh.CacheTTL = 2 * time.Minute
		case wh.CacheTTL < 0:
			wh.CacheTTL = 0
		}
		opts.TokenWebhook = &auth.TokenWebhookOptions{ConfigFile: wh.ConfigFile, Version: wh.Version, CacheTTL: wh.CacheTTL}
	}
	opts.Context = ctx
	return nil
}
