package auth

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/utils/ptr"
)

// TestOIDCFlagsJWTAuthenticator translates the --oidc-* flags as
// kube-apiserver does: user names prefixed with the issuer URL unless the
// claim is email or the prefix is given ("-": none).
func TestOIDCFlagsJWTAuthenticator(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	const url = "https://issuer.example.com"
	issuer := apiserver.Issuer{URL: url, Audiences: []string{"kube"}}
	username := func(prefix, claim string) apiserver.ClaimMappings {
		return apiserver.ClaimMappings{Username: apiserver.PrefixedClaimOrExpression{Prefix: ptr.To(prefix), Claim: claim}}
	}
	for _, c := range []struct {
		name  string
		flags OIDCFlags
		want  apiserver.JWTAuthenticator
	}{
		{"sub by default, prefixed with the issuer", OIDCFlags{IssuerURL: url, ClientID: "kube"},
			apiserver.JWTAuthenticator{Issuer: issuer, ClaimMappings: username(url+"#", "sub")}},
		{"email unprefixed", OIDCFlags{IssuerURL: url, ClientID: "kube", UsernameClaim: "email"},
			apiserver.JWTAuthenticator{Issuer: issuer, ClaimMappings: username("", "email")}},
		{"no prefix", OIDCFlags{IssuerURL: url, ClientID: "kube", UsernameClaim: "name", UsernamePrefix: "-"},
			apiserver.JWTAuthenticator{Issuer: issuer, ClaimMappings: username("", "name")}},
		{"everything", OIDCFlags{IssuerURL: url, ClientID: "kube", CAFile: ca, UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "g:",
			RequiredClaims: map[string]string{"tenant": "acme", "hd": "example.com"}},
			apiserver.JWTAuthenticator{
				Issuer: apiserver.Issuer{URL: url, Audiences: []string{"kube"}, CertificateAuthority: "PEM"},
				ClaimMappings: apiserver.ClaimMappings{
					Username: apiserver.PrefixedClaimOrExpression{Prefix: ptr.To("oidc:"), Claim: "sub"},
					Groups:   apiserver.PrefixedClaimOrExpression{Prefix: ptr.To("g:"), Claim: "groups"},
				},
				ClaimValidationRules: []apiserver.ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}, {Claim: "tenant", RequiredValue: "acme"}},
			}},
	} {
		got, err := c.flags.JWTAuthenticator()
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
		// Valid as kube-apiserver validates it (the CA aside: not a
		// certificate here).
		got.Issuer.CertificateAuthority = ""
		if err := ValidateAuthenticationConfig(&apiserver.AuthenticationConfiguration{JWT: []apiserver.JWTAuthenticator{got}}, nil); err != nil {
			t.Errorf("%s: not valid: %v", c.name, err)
		}
	}
	if _, err := (OIDCFlags{IssuerURL: url, ClientID: "kube", CAFile: filepath.Join(t.TempDir(), "missing")}).JWTAuthenticator(); !os.IsNotExist(err) {
		t.Errorf("missing CA file: %v", err)
	}
}
