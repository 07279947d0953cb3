package serviceaccount

import (
	"encoding/json"
	"net/http"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// The paths of the OIDC discovery document and the key set.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// maxAge is how long clients may cache the documents, as kube-apiserver
// lets them (one hour).
const maxAge = "public, max-age=3600"

// Discovery serves the OIDC discovery document and the JWKS of the keys
// that verify tokens. jwksURI is where the JWKS is reached from outside
// (the server's URL and JWKSPath).
func (t *Tokens) Discovery(jwksURI string) (config, jwks http.Handler, err error) {
	var set jose.JSONWebKeySet
	algs := []string{}
	for _, k := range t.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Algorithm: string(k.alg), Key: k.key, KeyID: k.id, Use: "sig"})
		if !slices.Contains(algs, string(k.alg)) {
			algs = append(algs, string(k.alg))
		}
	}
	keys, err := json.Marshal(set)
	if err != nil {
		return nil, nil, err
	}
	doc, err := json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	}{t.opts.Issuers[0], jwksURI, []string{"id_token"}, []string{"public"}, algs})
	if err != nil {
		return nil, nil, err
	}
	return serveJSON(doc, "application/json"), serveJSON(keys, "application/jwk-set+json"), nil
}

func serveJSON(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", maxAge)
		_, _ = w.Write(body)
	})
}
