package main

import (
	"flag"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/crdserver/crdserver/server"
)

// TestAuthnFlags maps kube-apiserver's authentication flags to the
// server's options: the --oidc-* flags only when one is given (with their
// defaults), an explicit --anonymous-auth noted, a webhook cache TTL of 0
// meaning none.
func TestAuthnFlags(t *testing.T) {
	parse := func(args ...string) server.AuthenticationOptions {
		t.Helper()
		fs := flag.NewFlagSet("crdserver", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("anonymous-auth", true, "")
		f := addAuthnFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.options(fs)
	}
	for _, c := range []struct {
		args []string
		want server.AuthenticationOptions
	}{
		{nil, server.AuthenticationOptions{TokenWebhook: server.TokenWebhookOptions{Version: "v1beta1", CacheTTL: 2 * time.Minute}}},
		{[]string{"--authentication-config", "a.yaml", "--anonymous-auth=true"}, server.AuthenticationOptions{ConfigFile: "a.yaml", AnonymousFlagSet: true,
			TokenWebhook: server.TokenWebhookOptions{Version: "v1beta1", CacheTTL: 2 * time.Minute}}},
		{[]string{"--oidc-issuer-url", "https://issuer", "--oidc-client-id", "kube", "--oidc-required-claim", "tenant=acme", "--oidc-required-claim", "hd=example.com"},
			server.AuthenticationOptions{
				OIDC: server.OIDCOptions{IssuerURL: "https://issuer", ClientID: "kube", UsernameClaim: "sub", SigningAlgs: []string{"RS256"},
					RequiredClaims: map[string]string{"tenant": "acme", "hd": "example.com"}},
				TokenWebhook: server.TokenWebhookOptions{Version: "v1beta1", CacheTTL: 2 * time.Minute}}},
		{[]string{"--oidc-groups-claim", "groups", "--oidc-signing-algs", "RS256,ES256"},
			server.AuthenticationOptions{
				OIDC:         server.OIDCOptions{UsernameClaim: "sub", GroupsClaim: "groups", SigningAlgs: []string{"RS256", "ES256"}, RequiredClaims: map[string]string{}},
				TokenWebhook: server.TokenWebhookOptions{Version: "v1beta1", CacheTTL: 2 * time.Minute}}},
		{[]string{"--authentication-token-webhook-config-file", "wh.kubeconfig", "--authentication-token-webhook-version", "v1", "--authentication-token-webhook-cache-ttl", "0"},
			server.AuthenticationOptions{TokenWebhook: server.TokenWebhookOptions{ConfigFile: "wh.kubeconfig", Version: "v1", CacheTTL: -1}}},
	} {
		got := parse(c.args...)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, want %+v", c.args, got, c.want)
		}
	}
}
