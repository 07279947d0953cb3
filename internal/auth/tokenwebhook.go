package auth

import (
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
)

// TokenWebhookOptions configure a token authentication webhook, as
// kube-apiserver's --authentication-token-webhook-* flags: a remote
// service answers TokenReviews for bearer tokens.
type TokenWebhookOptions struct {
	// ConfigFile is the webhook's kubeconfig.
	ConfigFile string
	// Version is the authentication.k8s.io version of the TokenReviews
	// sent (v1 or v1beta1).
	Version string
	// CacheTTL is how long the webhook's answers, yes or no, are kept.
	CacheTTL time.Duration
}

// newTokenWebhook builds the webhook token authenticator as kube-apiserver
// does: kube's webhook client with its retry backoff, its answers cached
// for CacheTTL, and tokens for the server's audiences unless the webhook
// says which.
func newTokenWebhook(o TokenWebhookOptions, apiAudiences authenticator.Audiences) (authenticator.Token, error) {
	cfg, err := webhookutil.LoadKubeconfig(o.ConfigFile, nil)
	if err != nil {
		return nil, err
	}
	w, err := webhook.New(cfg, o.Version, apiAudiences, *genericoptions.DefaultAuthWebhookRetryBackoff())
	if err != nil {
		return nil, err
	}
	return tokencache.New(w, false, o.CacheTTL, o.CacheTTL), nil
}
