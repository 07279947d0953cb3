package admissionregistration

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdserver/crdserver/internal/auth"
)

// paramAuthorizer holds Kubernetes' checks of a policy's parameters: who
// writes a policy with a paramKind must be able to get every object of
// that kind, and who writes a binding with a paramRef must be able to get
// (list, for a selector) the objects it names, so that nobody reads, by
// a policy's messages, objects they cannot read. The superuser group
// (system:masters) is never checked. A refusal is a Forbidden cause of a
// 422, worded as Kubernetes words it.
type paramAuthorizer struct {
	authz   auth.Authorizer
	resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

// escalationAllowed says whether the writer is a superuser.
func escalationAllowed(ctx context.Context) bool {
	u, ok := auth.UserFrom(ctx)
	return ok && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

// resourceOf resolves a kind to its resource; "*" when it cannot.
func (a *paramAuthorizer) resourceOf(gvk schema.GroupVersionKind) (string, error) {
	if a.resolve == nil {
		return "*", fmt.Errorf("no resolver")
	}
	gvr, err := a.resolve(gvk)
	if err != nil {
		return "*", err
	}
	return gvr.Resource, nil
}

// authorizeParamKind checks the writer of a policy with a paramKind.
func (a *paramAuthorizer) authorizeParamKind(ctx context.Context, pk *admissionv1.ParamKind) field.ErrorList {
	if a == nil || a.authz == nil || pk == nil || escalationAllowed(ctx) {
		return nil
	}
	p := field.NewPath("spec", "paramKind")
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return field.ErrorList{field.Forbidden(p, "cannot identify user to authorize read access to paramKind resources")}
	}
	res, group, version := "*", "*", "*"
	if gv, err := schema.ParseGroupVersion(pk.APIVersion); err == nil {
		group, version = gv.Group, gv.Version
		if r, err := a.resourceOf(gv.WithKind(pk.Kind)); err == nil {
			res = r
		}
	}
	d, _, err := auth.AuthorizerFrom(ctx, a.authz).Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "get", ResourceRequest: true,
		Name: "*", Namespace: "*", APIGroup: group, APIVersion: version, Resource: res})
	switch {
	case err != nil:
		return field.ErrorList{field.Forbidden(p, err.Error())}
	case d != authorizer.DecisionAllow:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(`user %v must have "get" permission on all objects of the referenced paramKind (kind=%s, apiVersion=%s)`,
			userString(u), pk.Kind, pk.APIVersion))}
	}
	return nil
}

// authorizeParamRef checks the writer of a binding with a paramRef;
// policyKind finds the paramKind of the policy it binds. Kubernetes words
// the refusal of a mutating binding with its verb and user swapped.
func (a *paramAuthorizer) authorizeParamRef(ctx context.Context, policyName string, ref *admissionv1.ParamRef,
	policyKind func(ctx context.Context, name string) (*admissionv1.ParamKind, bool), mutating bool) field.ErrorList {
	if a == nil || a.authz == nil || ref == nil || escalationAllowed(ctx) {
		return nil
	}
	p := field.NewPath("spec", "paramRef")
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return field.ErrorList{field.Forbidden(p, "cannot identify user to authorize read access to paramRef object")}
	}
	res, group, version := "*", "*", "*"
	pk, found := policyKind(ctx, policyName)
	var parseErr, resolveErr error
	if found && pk != nil {
		var gv schema.GroupVersion
		if gv, parseErr = schema.ParseGroupVersion(pk.APIVersion); parseErr == nil {
			group, version = gv.Group, gv.Version
			var r string
			if r, resolveErr = a.resourceOf(gv.WithKind(pk.Kind)); resolveErr == nil {
				res = r
			}
		}
	}
	verb := "get"
	if ref.Name == "" {
		verb = "list"
	}
	d, _, err := auth.AuthorizerFrom(ctx, a.authz).Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, ResourceRequest: true,
		Name: ref.Name, Namespace: ref.Namespace, APIGroup: group, APIVersion: version, Resource: res})
	if err != nil {
		if mutating {
			return field.ErrorList{field.Forbidden(p, err.Error())}
		}
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("failed to authorize request: %v", err))}
	}
	if d == authorizer.DecisionAllow {
		return nil
	}
	who := userString(u)
	var msg string
	switch {
	case !found:
		msg = fmt.Sprintf(`unable to get policy %s to determine minimum required permissions and user %v does not have "%v" permission for all groups, versions and resources`, policyName, who, verb)
	case parseErr != nil:
		msg = fmt.Sprintf(`unable to parse paramKind %v to determine minimum required permissions and user %v does not have "%v" permission for all groups, versions and resources`, paramKindString(pk), who, verb)
	case resolveErr != nil:
		msg = fmt.Sprintf(`unable to resolve paramKind %v to determine minimum required permissions and user %v does not have "%v" permission for all groups, versions and resources`, paramKindString(pk), who, verb)
	case mutating:
		msg = fmt.Sprintf(`user %v does not have "%v" permission on the object referenced by paramRef`, verb, who)
	default:
		msg = fmt.Sprintf(`user %v does not have "%v" permission on the object referenced by paramRef`, who, verb)
	}
	return field.ErrorList{field.Forbidden(p, msg)}
}

// userString prints a user as Kubernetes' messages do (%v of its
// *user.DefaultInfo).
func userString(u user.Info) string {
	d := &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	return fmt.Sprintf("%v", d)
}

// paramKindString prints a paramKind as Kubernetes' messages do (%v of
// its internal type).
func paramKindString(pk *admissionv1.ParamKind) string {
	return fmt.Sprintf("&{%s %s}", pk.APIVersion, pk.Kind)
}
