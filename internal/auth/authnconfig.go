package auth

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/install"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"k8s.io/utils/ptr"
)

var (
	authnConfigScheme = runtime.NewScheme()
	authnConfigCodecs = serializer.NewCodecFactory(authnConfigScheme, serializer.EnableStrict)
)

func init() {
	install.Install(authnConfigScheme)
}

// LoadAuthenticationConfig reads an AuthenticationConfiguration file
// (apiserver.config.k8s.io/v1, v1beta1 or v1alpha1) as kube-apiserver's
// --authentication-config does, strictly, with its errors, and returns it
// with the file's contents. It does not validate it: see
// ValidateAuthenticationConfig.
func LoadAuthenticationConfig(path string) (*apiserver.AuthenticationConfiguration, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	c, err := decodeAuthenticationConfig(data)
	if err != nil {
		return nil, "", err
	}
	return c, string(data), nil
}

// decodeAuthenticationConfig decodes a file's contents, with
// kube-apiserver's messages.
func decodeAuthenticationConfig(data []byte) (*apiserver.AuthenticationConfiguration, error) {
	if len(data) == 0 {
		return nil, errors.New("empty config data")
	}
	obj, err := runtime.Decode(authnConfigCodecs.UniversalDecoder(), data)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*apiserver.AuthenticationConfiguration)
	if !ok {
		return nil, fmt.Errorf("expected AuthenticationConfiguration, got %T", obj)
	}
	if c == nil {
		return nil, errors.New("expected non-nil AuthenticationConfiguration")
	}
	return c, nil
}

// ValidateAuthenticationConfig validates a configuration as kube-apiserver
// does, with the CEL expressions compiled; disallowedIssuers are the
// ServiceAccount token issuers, which no JWT authenticator may claim.
func ValidateAuthenticationConfig(c *apiserver.AuthenticationConfiguration, disallowedIssuers []string) error {
	return apiservervalidation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), c, disallowedIssuers).ToAggregate()
}

// OIDCFlags are kube-apiserver's --oidc-* flags.
type OIDCFlags struct {
	IssuerURL, ClientID, CAFile string
	// UsernameClaim defaults to "sub".
	UsernameClaim string
	// UsernamePrefix: empty prefixes claims other than "email" with
	// "IssuerURL#"; "-" prefixes nothing.
	UsernamePrefix            string
	GroupsClaim, GroupsPrefix string
	RequiredClaims            map[string]string
	// SigningAlgs default to RS256.
	SigningAlgs []string
}

// Set says whether any of the flags is set.
func (f OIDCFlags) Set() bool {
	return f.IssuerURL != "" || f.ClientID != "" || f.CAFile != "" || f.UsernameClaim != "" || f.UsernamePrefix != "" ||
		f.GroupsClaim != "" || f.GroupsPrefix != "" || len(f.RequiredClaims) > 0 || len(f.SigningAlgs) > 0
}

// JWTAuthenticator translates the flags into the one JWT authenticator
// kube-apiserver makes of them.
func (f OIDCFlags) JWTAuthenticator() (apiserver.JWTAuthenticator, error) {
	claim := f.UsernameClaim
	if claim == "" {
		claim = "sub"
	}
	prefix := f.UsernamePrefix
	if prefix == "" && claim != "email" {
		prefix = f.IssuerURL + "#"
	}
	if prefix == "-" {
		prefix = ""
	}
	j := apiserver.JWTAuthenticator{
		Issuer: apiserver.Issuer{URL: f.IssuerURL, Audiences: []string{f.ClientID}},
		ClaimMappings: apiserver.ClaimMappings{
			Username: apiserver.PrefixedClaimOrExpression{Prefix: ptr.To(prefix), Claim: claim},
		},
	}
	if f.GroupsClaim != "" {
		j.ClaimMappings.Groups = apiserver.PrefixedClaimOrExpression{Prefix: ptr.To(f.GroupsPrefix), Claim: f.GroupsClaim}
	}
	if f.CAFile != "" {
		ca, err := os.ReadFile(f.CAFile)
		if err != nil {
			return j, err
		}
		j.Issuer.CertificateAuthority = string(ca)
	}
	claims := make([]string, 0, len(f.RequiredClaims))
	for c := range f.RequiredClaims {
		claims = append(claims, c)
	}
	sort.Strings(claims)
	for _, c := range claims {
		j.ClaimValidationRules = append(j.ClaimValidationRules, apiserver.ClaimValidationRule{Claim: c, RequiredValue: f.RequiredClaims[c]})
	}
	return j, nil
}

// OIDCSigningAlgs are the signing algorithms the flags allow.
func (f OIDCFlags) OIDCSigningAlgs() []string {
	if len(f.SigningAlgs) == 0 {
		return []string{"RS256"}
	}
	return f.SigningAlgs
}
