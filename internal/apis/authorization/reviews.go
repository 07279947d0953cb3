package authorization

import (
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	kjson "sigs.k8s.io/json"

	"github.com/crdserver/crdserver/internal/auth"
	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// Reviews are the create-only resources that ask the server about access:
// authentication.k8s.io's SelfSubjectReview (kubectl auth whoami) and
// TokenReview (answered by the server's authenticator authn returns, nil
// while there is none), and authorization.k8s.io's access and rules
// reviews (kubectl auth can-i), answered by the server's authorization
// chain the request went through (system:masters and the RBAC roles in st
// without one). Nothing is stored.
func Reviews(st *rbacpolicy.Store, authn func() *auth.Authenticator) []*resource.Resource {
	authz := auth.DefaultChain(st)
	mk := func(group, plural, kind string, namespaced bool, serve func(w http.ResponseWriter, r *http.Request, info *request.Info, t request.Target, body []byte) (any, error)) *resource.Resource {
		return &resource.Resource{
			Group: group, Plural: plural, Singular: strings.ToLower(kind), Kind: kind, Namespaced: namespaced,
			Versions: []*resource.Version{{Name: "v1"}}, StorageVersion: "v1", Verbs: []string{"create"},
			Custom: func(w http.ResponseWriter, r *http.Request, info *request.Info, _ *resource.Version) {
				switch {
				case info.Verb == "create" && info.Name == "" && info.Subresource == "":
				case info.Name != "" && info.Verb != "list" && info.Verb != "watch":
					// A review is no object: a path that names one
					// is not served (a list's name comes from its
					// field selector).
					request.WriteError(w, r, withEmptyDetails(request.NotFound()))
					return
				default:
					request.WriteError(w, r, methodNotAllowed())
					return
				}
				t, err := request.Negotiate(r, request.Offer{Protobuf: true})
				if err != nil {
					request.WriteError(w, r, err)
					return
				}
				body, err := request.ReadBody(r)
				if err == nil {
					if mt := request.MediaType(r); mt == request.Protobuf {
						body, err = request.ProtobufToJSON(body, kind)
					} else {
						body, err = request.ToJSON(body, mt, kind)
					}
				}
				if err != nil {
					request.WriteError(w, r, err)
					return
				}
				out, err := serve(w, r, info, t, body)
				if err != nil {
					request.WriteError(w, r, err)
					return
				}
				request.WriteObject(w, r, http.StatusCreated, t, out)
			},
		}
	}
	return []*resource.Resource{
		mk("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", false, func(_ http.ResponseWriter, r *http.Request, _ *request.Info, _ request.Target, body []byte) (any, error) {
			rv := &authenticationv1.SelfSubjectReview{}
			if err := decodeReview(body, rv, "SelfSubjectReview"); err != nil {
				return nil, err
			}
			u, _ := auth.UserFrom(r.Context())
			info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
			if extra := u.GetExtra(); len(extra) > 0 {
				info.Extra = map[string]authenticationv1.ExtraValue{}
				for k, v := range extra {
					info.Extra[k] = v
				}
			}
			rv.Status.UserInfo = info
			rv.APIVersion, rv.Kind = "authentication.k8s.io/v1", "SelfSubjectReview"
			rv.CreationTimestamp = metav1.Now().Rfc3339Copy()
			return rv, nil
		}),
		mk("authentication.k8s.io", "tokenreviews", "TokenReview", false, func(w http.ResponseWriter, r *http.Request, _ *request.Info, _ request.Target, body []byte) (any, error) {
			return reviewToken(w, r, authn, body)
		}),
		mk("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, func(_ http.ResponseWriter, r *http.Request, _ *request.Info, _ request.Target, body []byte) (any, error) {
			rv := &authorizationv1.SelfSubjectAccessReview{}
			if err := decodeReview(body, rv, "SelfSubjectAccessReview"); err != nil {
				return nil, err
			}
			if errs := validateAttributes(rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes); len(errs) > 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "", errs)
			}
			u, _ := auth.UserFrom(r.Context())
			rv.Status = decide(r, auth.AuthorizerFrom(r.Context(), authz), u, rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes)
			rv.APIVersion, rv.Kind = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
			return rv, nil
		}),
		mk("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", false, func(_ http.ResponseWriter, r *http.Request, _ *request.Info, _ request.Target, body []byte) (any, error) {
			rv := &authorizationv1.SubjectAccessReview{}
			if err := decodeReview(body, rv, "SubjectAccessReview"); err != nil {
				return nil, err
			}
			errs := validateAttributes(rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes)
			if rv.Spec.User == "" && len(rv.Spec.Groups) == 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "user"), rv.Spec.User, "at least one of user or group must be specified"))
			}
			if len(errs) > 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}, "", errs)
			}
			rv.Status = decide(r, auth.AuthorizerFrom(r.Context(), authz), subject(rv.Spec), rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes)
			rv.APIVersion, rv.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			return rv, nil
		}),
		mk("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", true, func(_ http.ResponseWriter, r *http.Request, info *request.Info, _ request.Target, body []byte) (any, error) {
			rv := &authorizationv1.LocalSubjectAccessReview{}
			if err := decodeReview(body, rv, "LocalSubjectAccessReview"); err != nil {
				return nil, err
			}
			var errs field.ErrorList
			if rv.Spec.ResourceAttributes == nil {
				errs = append(errs, field.Required(field.NewPath("spec", "resourceAttributes"), ""))
			}
			if rv.Spec.NonResourceAttributes != nil {
				errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), rv.Spec.NonResourceAttributes, "disallowed on this kind of request"))
			}
			if rv.Spec.User == "" && len(rv.Spec.Groups) == 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "user"), rv.Spec.User, "at least one of user or group must be specified"))
			}
			if len(errs) > 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "LocalSubjectAccessReview"}, "", errs)
			}
			if rv.Spec.ResourceAttributes.Namespace != info.Namespace {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", info.Namespace))
			}
			rv.Status = decide(r, auth.AuthorizerFrom(r.Context(), authz), subject(rv.Spec), rv.Spec.ResourceAttributes, nil)
			rv.Namespace = info.Namespace
			rv.APIVersion, rv.Kind = "authorization.k8s.io/v1", "LocalSubjectAccessReview"
			return rv, nil
		}),
		mk("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false, func(_ http.ResponseWriter, r *http.Request, _ *request.Info, _ request.Target, body []byte) (any, error) {
			rv := &authorizationv1.SelfSubjectRulesReview{}
			if err := decodeReview(body, rv, "SelfSubjectRulesReview"); err != nil {
				return nil, err
			}
			u, _ := auth.UserFrom(r.Context())
			var rules []rbacv1.PolicyRule
			var errs []error
			incomplete := false
			if rr, ok := auth.AuthorizerFrom(r.Context(), authz).(rulesResolver); ok {
				rules, incomplete, errs = rr.RulesFor(u, rv.Spec.Namespace)
			} else {
				rules, errs = st.RulesFor(u, rv.Spec.Namespace)
			}
			rv.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
			for _, rule := range rules {
				if len(rule.NonResourceURLs) > 0 {
					rv.Status.NonResourceRules = append(rv.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
				} else {
					rv.Status.ResourceRules = append(rv.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
				}
			}
			rv.Status.Incomplete = incomplete
			if len(errs) > 0 {
				rv.Status.EvaluationError = utilerrors.NewAggregate(errs).Error()
			}
			rv.APIVersion, rv.Kind = "authorization.k8s.io/v1", "SelfSubjectRulesReview"
			return rv, nil
		}),
	}
}

// rulesResolver lists a user's rules through the server's whole
// authorization chain.
type rulesResolver interface {
	RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, bool, []error)
}

// methodNotAllowed is Kubernetes' answer to a method a collection path
// does not serve.
func methodNotAllowed() error {
	return withEmptyDetails(request.NewStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource"))
}

// withEmptyDetails gives a Status the empty details Kubernetes' answers
// for paths in a group version it does not route carry.
func withEmptyDetails(err *apierrors.StatusError) *apierrors.StatusError {
	err.ErrStatus.Details = &metav1.StatusDetails{}
	return err
}

func decodeReview(body []byte, into any, kind string) error {
	if _, err := kjson.UnmarshalStrict(body, into); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version \"v1\" cannot be handled as a %s: %v", kind, kind, err))
	}
	return nil
}

func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	p := field.NewPath("spec")
	switch {
	case ra == nil && nra == nil:
		return field.ErrorList{field.Required(p.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	case ra != nil && nra != nil:
		return field.ErrorList{field.Invalid(p.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes")}
	}
	return nil
}

func subject(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// decide asks the authorizer about the attributes of a review.
func decide(r *http.Request, z auth.Authorizer, u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := authorizer.AttributesRecord{User: u}
	if ra != nil {
		a.ResourceRequest = true
		a.Verb, a.Namespace, a.APIGroup, a.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
		a.Resource, a.Subresource, a.Name = ra.Resource, ra.Subresource, ra.Name
	} else {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	d, reason, err := z.Authorize(r.Context(), a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}
