package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

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

// Chain asks each authorizer in turn; the first that allows or denies
// decides.
type Chain []Authorizer

// Authorize implements authorizer.Authorizer.
func (c Chain) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range c {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if d != authorizer.DecisionNoOpinion {
			return d, reason, err
		}
	}
	reason := ""
	if len(reasons) > 0 {
		reason = reasons[0]
		for _, r := range reasons[1:] {
			reason += "; " + r
		}
	}
	return authorizer.DecisionNoOpinion, reason, errors.Join(errs...)
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

// Forbidden is the 403 Kubernetes answers when a request is not allowed.
func Forbidden(a authorizer.Attributes, reason string) *apierrors.StatusError {
	name := ""
	if u := a.GetUser(); u != nil {
		name = u.GetName()
	}
	var msg string
	switch {
	case !a.IsResourceRequest():
		msg = fmt.Sprintf("User %q cannot %s path %q", name, a.GetVerb(), a.GetPath())
	default:
		res := a.GetResource()
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		if ns := a.GetNamespace(); ns != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.GetVerb(), res, a.GetAPIGroup(), ns)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.GetVerb(), res, a.GetAPIGroup())
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.GetAPIGroup(), Resource: a.GetResource()}, a.GetName(), errors.New(msg))
}

// WithAuthorization lets a request through only if z allows it.
func WithAuthorization(next http.Handler, z Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		a := Attributes(u, request.InfoFrom(r.Context()))
		d, reason, err := z.Authorize(r.Context(), a)
		if d == authorizer.DecisionAllow {
			request.AddAuditAnnotation(r.Context(), "authorization.k8s.io/decision", "allow")
			if reason != "" {
				request.AddAuditAnnotation(r.Context(), "authorization.k8s.io/reason", reason)
			}
			next.ServeHTTP(w, r)
			return
		}
		request.AddAuditAnnotation(r.Context(), "authorization.k8s.io/decision", "forbid")
		if reason != "" {
			request.AddAuditAnnotation(r.Context(), "authorization.k8s.io/reason", reason)
		}
		if err != nil && reason == "" {
			reason = err.Error()
		}
		request.WriteError(w, r, Forbidden(a, reason))
	})
}
