package auth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/crdserver/crdserver/internal/request"
)

// Authorizer decides whether a request may be served: Allow, Deny, or no
// opinion (the next authorizer decides), with a reason.
type Authorizer interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
}

// Privileged allows everything to members of system:masters, as
// kube-apiserver does before any other authorizer.
type Privileged struct{}

// Authorize implements authorizer.Authorizer.
func (Privileged) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// Named is an authorizer of a configured chain with its name.
type Named struct {
	Name string
	Authorizer
}

// NamedChain asks each authorizer in turn, as kube-apiserver's union of
// the configured authorizers does: the first that allows or denies
// decides, with its own reason and error; when none does, the reasons are
// each prefixed by their authorizer's name, one a line, and the errors
// aggregated.
type NamedChain []Named

// Authorize implements authorizer.Authorizer.
func (c NamedChain) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range c {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, z.Name+": "+reason)
		}
		if d != authorizer.DecisionNoOpinion {
			return d, reason, err
		}
	}
	return authorizer.DecisionNoOpinion, strings.Join(reasons, "\n"), utilerrors.NewAggregate(errs)
}

// PrivilegedName is the name of Privileged in a NamedChain, as
// kube-apiserver names it.
const PrivilegedName = "kubernetes.io/system-privileged-group"

// DefaultChain is the chain of kube-apiserver's default
// --authorization-mode=RBAC: system:masters, then rbac.
func DefaultChain(rbac Authorizer) NamedChain {
	return NamedChain{{Name: PrivilegedName, Authorizer: Privileged{}}, {Name: "rbac", Authorizer: rbac}}
}

// Attributes are what authorization looks at in a request.
func Attributes(u user.Info, info *request.Info) authorizer.AttributesRecord {
	a := authorizer.AttributesRecord{User: u, Verb: info.Verb, Path: info.Path}
	if info.IsResourceRequest {
		a.ResourceRequest = true
		a.Namespace = info.Namespace
		a.APIGroup = info.Group
		a.APIVersion = info.Version
		a.Resource = info.Resource
		a.Subresource = info.Subresource
		a.Name = info.Name
	}
	return a
}

// Forbidden is the 403 Kubernetes answers when a request is not allowed:
// kube-apiserver's own message, with the authorizers' reason after it.
func Forbidden(a authorizer.Attributes, reason string) *apierrors.StatusError {
	return responsewriters.ForbiddenStatusError(a, reason)
}

// WithAuthorization lets a request through only if z allows it. A
// request not allowed whose authorizers failed (a webhook that did not
// answer) is a 500, as kube-apiserver answers it; one refused is a 403
// with the authorizers' reason. The request's context carries z for the
// access reviews (AuthorizerFrom).
func WithAuthorization(next http.Handler, z Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), authorizerKey{}, z)
		r = r.WithContext(ctx)
		u, _ := UserFrom(ctx)
		a := Attributes(u, request.InfoFrom(ctx))
		d, reason, err := z.Authorize(ctx, a)
		if d == authorizer.DecisionAllow {
			request.AddAuditAnnotation(ctx, "authorization.k8s.io/decision", "allow")
			if reason != "" {
				request.AddAuditAnnotation(ctx, "authorization.k8s.io/reason", reason)
			}
			next.ServeHTTP(w, r)
			return
		}
		if err != nil {
			request.AddAuditAnnotation(ctx, "authorization.k8s.io/reason", "internal error")
			internalError(w, r, err)
			return
		}
		request.AddAuditAnnotation(ctx, "authorization.k8s.io/decision", "forbid")
		if reason != "" {
			request.AddAuditAnnotation(ctx, "authorization.k8s.io/reason", reason)
		}
		request.WriteError(w, r, Forbidden(a, reason))
	})
}

// internalError is kube-apiserver's answer when authorization failed: a
// plain-text 500, not a Status.
func internalError(w http.ResponseWriter, r *http.Request, err error) {
	http.Error(w, htmlEscaper.Replace(fmt.Sprintf("Internal Server Error: %q: %v", r.RequestURI, err)), http.StatusInternalServerError)
}

var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

type authorizerKey struct{}

// AuthorizerFrom is the authorizer that let the request in (the server's
// whole chain), or def when there is none in ctx.
func AuthorizerFrom(ctx context.Context, def Authorizer) Authorizer {
	if z, ok := ctx.Value(authorizerKey{}).(Authorizer); ok {
		return z
	}
	return def
}
