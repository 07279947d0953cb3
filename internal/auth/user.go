// Package auth authenticates requests as Kubernetes does (x509 client
// certificates, bearer tokens from a token file, anonymous requests,
// impersonation) and authorizes them (system:masters, then RBAC), with
// Kubernetes' users, groups and Status errors.
package auth

import (
	"context"

	"k8s.io/apiserver/pkg/authentication/user"
)

type userKey struct{}

// WithUser returns a context carrying the request's user.
func WithUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the request's user, if authenticated.
func UserFrom(ctx context.Context) (user.Info, bool) {
	u, ok := ctx.Value(userKey{}).(user.Info)
	return u, ok && u != nil
}

// Loopback is the user of crdserver's own controllers, which call its API
// in-process.
var Loopback user.Info = &user.DefaultInfo{Name: "system:apiserver", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}

// Unsecured is the user of every request on a plain-HTTP server, as on the
// insecure port kube-apiserver once had: trusted with everything.
var Unsecured user.Info = &user.DefaultInfo{Name: "system:unsecured", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
