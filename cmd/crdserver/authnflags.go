package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/crdserver/crdserver/server"
)

// authnFlags are kube-apiserver's flags for JWT (OpenID Connect) issuers
// and token webhooks.
type authnFlags struct {
	config                        *string
	oidcRequired                  requiredClaims
	oidcAlgs                      listFlag
	webhookConfig, webhookVersion *string
	webhookCacheTTL               *time.Duration
	issuerURL, clientID, caFile   *string
	usernameClaim, usernamePrefix *string
	groupsClaim, groupsPrefix     *string
}

// addAuthnFlags registers the authentication flags on fs.
func addAuthnFlags(fs *flag.FlagSet) *authnFlags {
	f := &authnFlags{oidcRequired: requiredClaims{}}
	f.config = fs.String("authentication-config", "", "AuthenticationConfiguration file (apiserver.config.k8s.io/v1) with JWT issuers (OpenID Connect) and the anonymous authenticator, read again when it changes; excludes the --oidc-* flags, and --anonymous-auth if it configures anonymous")
	f.issuerURL = fs.String("oidc-issuer-url", "", "URL of the OpenID issuer (https only); with --oidc-client-id its ID tokens authenticate")
	f.clientID = fs.String("oidc-client-id", "", "client ID for the OpenID Connect client (the audience tokens must name); must be set if --oidc-issuer-url is")
	f.caFile = fs.String("oidc-ca-file", "", "CAs (PEM) that verify the OpenID issuer's certificate (default: the host's roots)")
	f.usernameClaim = fs.String("oidc-username-claim", "sub", "the OpenID claim to use as the user name")
	f.usernamePrefix = fs.String("oidc-username-prefix", "", "prefix of user names; if not given, claims other than 'email' are prefixed by the issuer URL and '#'; '-' for none")
	f.groupsClaim = fs.String("oidc-groups-claim", "", "the OpenID claim (a string or an array of strings) to use as the user's groups")
	f.groupsPrefix = fs.String("oidc-groups-prefix", "", "prefix of every group")
	fs.Var(f.oidcRequired, "oidc-required-claim", "key=value: a claim tokens must have, with this value (repeatable)")
	fs.Var(&f.oidcAlgs, "oidc-signing-algs", "accepted JOSE signing algorithms, comma-separated (RS256, RS384, RS512, ES256, ES384, ES512, PS256, PS384, PS512; default RS256)")
	f.webhookConfig = fs.String("authentication-token-webhook-config-file", "", "kubeconfig of a webhook that answers TokenReviews for bearer tokens")
	f.webhookVersion = fs.String("authentication-token-webhook-version", "v1beta1", "the authentication.k8s.io version of the TokenReviews sent to the webhook (v1beta1 or v1)")
	f.webhookCacheTTL = fs.Duration("authentication-token-webhook-cache-ttl", 2*time.Minute, "how long the token webhook's answers are kept")
	return f
}

// options are the server's authentication options from the parsed flags.
func (f *authnFlags) options(fs *flag.FlagSet) server.AuthenticationOptions {
	o := server.AuthenticationOptions{
		ConfigFile:   *f.config,
		TokenWebhook: server.TokenWebhookOptions{ConfigFile: *f.webhookConfig, Version: *f.webhookVersion, CacheTTL: *f.webhookCacheTTL},
	}
	if o.TokenWebhook.CacheTTL == 0 {
		o.TokenWebhook.CacheTTL = -1
	}
	oidcSet := false
	fs.Visit(func(fl *flag.Flag) {
		switch {
		case fl.Name == "anonymous-auth":
			o.AnonymousFlagSet = true
		case strings.HasPrefix(fl.Name, "oidc-"):
			oidcSet = true
		}
	})
	if oidcSet {
		o.OIDC = server.OIDCOptions{IssuerURL: *f.issuerURL, ClientID: *f.clientID, CAFile: *f.caFile, UsernameClaim: *f.usernameClaim,
			UsernamePrefix: *f.usernamePrefix, GroupsClaim: *f.groupsClaim, GroupsPrefix: *f.groupsPrefix, RequiredClaims: f.oidcRequired, SigningAlgs: f.oidcAlgs}
		if len(o.OIDC.SigningAlgs) == 0 {
			o.OIDC.SigningAlgs = []string{"RS256"}
		}
	}
	return o
}

// requiredClaims is the repeatable --oidc-required-claim key=value flag.
type requiredClaims map[string]string

func (r requiredClaims) String() string {
	var parts []string
	for k, v := range r {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (r requiredClaims) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("malformed pair, expect string=string")
	}
	r[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}
