package server

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/crdserver/crdserver/internal/auth"
)

// AuthorizationOptions configure the authorizers asked after
// system:masters, as kube-apiserver's flags do: either an
// AuthorizationConfiguration file (ConfigFile, reloaded when it changes)
// or the legacy modes, not both.
type AuthorizationOptions struct {
	// ConfigFile is an apiserver.config.k8s.io/v1 AuthorizationConfiguration
	// (--authorization-config): an ordered chain of RBAC, Webhook, Node,
	// AlwaysAllow and AlwaysDeny authorizers.
	ConfigFile string
	// Modes is --authorization-mode (default RBAC): AlwaysAllow,
	// AlwaysDeny, RBAC, Webhook, Node, in order.
	Modes []string
	// WebhookConfigFile is the kubeconfig of the Webhook mode's
	// SubjectAccessReview webhook; WebhookVersion the version of the
	// reviews it is sent (v1 or v1beta1, the default).
	WebhookConfigFile string
	WebhookVersion    string
	// WebhookCacheAuthorizedTTL and WebhookCacheUnauthorizedTTL are how
	// long the Webhook mode keeps its answers (default 5m and 30s;
	// negative: not kept).
	WebhookCacheAuthorizedTTL   time.Duration
	WebhookCacheUnauthorizedTTL time.Duration
	// ReloadInterval is how often ConfigFile is read again besides when it
	// is seen changing (default a minute, as kube-apiserver).
	ReloadInterval time.Duration
	// WebhookRetryBackoff is how a webhook that fails is retried
	// (default kube-apiserver's: 5 tries from 500ms, growing by 1.5).
	WebhookRetryBackoff *wait.Backoff
}

// legacySet says whether any of the legacy flags is set.
func (o AuthorizationOptions) legacySet() bool {
	return len(o.Modes) > 0 || o.WebhookConfigFile != "" || o.WebhookVersion != "" || o.WebhookCacheAuthorizedTTL != 0 || o.WebhookCacheUnauthorizedTTL != 0
}

// newAuthorizer builds the server's authorization chain; with a file it
// is reloaded until ctx ends.
func (s *Server) newAuthorizer(ctx context.Context) (*auth.ConfiguredAuthorizer, error) {
	o := s.cfg.Authorization
	ao := auth.AuthorizerOptions{RBAC: s.policy, ReloadInterval: o.ReloadInterval, WebhookRetryBackoff: o.WebhookRetryBackoff,
		Registerer: s.metrics.Registry, Log: s.log}
	if o.ConfigFile != "" {
		if o.legacySet() {
			return nil, errors.New("--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined")
		}
		cfg, data, err := auth.LoadAuthorizationConfiguration(o.ConfigFile)
		if err != nil {
			return nil, err
		}
		ao.File, ao.Config, ao.Data = o.ConfigFile, cfg, data
		return auth.NewConfiguredAuthorizer(ctx, ao)
	}
	m := auth.AuthorizationModes{Modes: o.Modes, WebhookConfigFile: o.WebhookConfigFile, WebhookVersion: o.WebhookVersion,
		WebhookCacheAuthorizedTTL: ttl(o.WebhookCacheAuthorizedTTL, 5*time.Minute), WebhookCacheUnauthorizedTTL: ttl(o.WebhookCacheUnauthorizedTTL, 30*time.Second)}
	if len(m.Modes) == 0 {
		m.Modes = []string{auth.ModeRBAC}
	}
	if m.WebhookVersion == "" {
		m.WebhookVersion = "v1beta1"
	}
	cfg, err := m.Configuration()
	if err != nil {
		return nil, err
	}
	ao.Config = cfg
	return auth.NewConfiguredAuthorizer(ctx, ao)
}

// ttl maps a TTL option to the webhook's: 0 the default, negative none.
func ttl(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}
