// Package serviceaccount issues and checks ServiceAccount tokens as
// kube-apiserver does: JWTs signed with the server's key (RSA or ECDSA,
// key ID the SHA-256 of the public key), issuer, audiences, expiry and the
// "kubernetes.io" claims naming the ServiceAccount and the object the token
// is bound to. A token authenticates as system:serviceaccount:<ns>:<name>,
// in the groups system:serviceaccounts and system:serviceaccounts:<ns>, for
// as long as it has not expired and its ServiceAccount (and bound object)
// still exist with the same uid. The public keys are published as an OIDC
// discovery document and a JWKS, so that others can verify the tokens.
//
// Kubernetes' own token code lives in k8s.io/kubernetes, which is not
// imported; this package writes the same claims and checks them the same
// way, with the same error texts, using go-jose and k8s.io/apiserver's
// ServiceAccount helpers.
package serviceaccount
