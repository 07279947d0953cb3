package main

import (
	"flag"
	"time"

	"github.com/crdserver/crdserver/server"
)

// authorizationFlags registers kube-apiserver's authorization flags on fs;
// the function it returns, called once fs is parsed, is what they say.
func authorizationFlags(fs *flag.FlagSet) func() server.AuthorizationOptions {
	var modes listFlag
	fs.Var(&modes, "authorization-mode", "ordered list of authorizers asked after system:masters (comma-separated: AlwaysAllow, AlwaysDeny, RBAC, Webhook, Node; default RBAC when --authorization-config is not used)")
	config := fs.String("authorization-config", "", "apiserver.config.k8s.io/v1 AuthorizationConfiguration file: the authorizer chain (RBAC, Webhook, Node, AlwaysAllow, AlwaysDeny), reloaded when it changes; not with --authorization-mode or --authorization-webhook-*")
	webhookFile := fs.String("authorization-webhook-config-file", "", "kubeconfig of the SubjectAccessReview webhook of --authorization-mode=Webhook")
	webhookVersion := fs.String("authorization-webhook-version", "v1beta1", "version of the authorization.k8s.io SubjectAccessReview sent to and expected from the webhook")
	authorizedTTL := fs.Duration("authorization-webhook-cache-authorized-ttl", 5*time.Minute, "how long the webhook's 'authorized' answers are kept (0: not kept)")
	unauthorizedTTL := fs.Duration("authorization-webhook-cache-unauthorized-ttl", 30*time.Second, "how long the webhook's 'unauthorized' answers are kept (0: not kept)")
	return func() server.AuthorizationOptions {
		o := server.AuthorizationOptions{ConfigFile: *config}
		// Only the flags given count, as kube-apiserver's check that
		// --authorization-config comes alone.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "authorization-mode":
				o.Modes = modes
			case "authorization-webhook-config-file":
				o.WebhookConfigFile = *webhookFile
			case "authorization-webhook-version":
				o.WebhookVersion = *webhookVersion
			case "authorization-webhook-cache-authorized-ttl":
				o.WebhookCacheAuthorizedTTL = orNone(*authorizedTTL)
			case "authorization-webhook-cache-unauthorized-ttl":
				o.WebhookCacheUnauthorizedTTL = orNone(*unauthorizedTTL)
			}
		})
		return o
	}
}

// orNone maps a flag's 0 (nothing kept) to the options' negative.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
