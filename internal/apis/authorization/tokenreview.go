package authorization

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	kjson "sigs.k8s.io/json"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/request"
)

var tokenReviewKind = authenticationv1.SchemeGroupVersion.WithKind("TokenReview")

// reviewToken answers a TokenReview as kube-apiserver does: 201 with
// status.authenticated, the user and the audiences the token is good for,
// or the reason it is not in status.error. A token that does not
// authenticate is not an HTTP error; a review without a token is (400).
func reviewToken(w http.ResponseWriter, r *http.Request, authn func() *auth.Authenticator, body []byte) (any, error) {
	rv, err := decodeTokenReview(w, r, body)
	if err != nil {
		return nil, err
	}
	// A cluster-scoped object is created without a namespace.
	rv.Namespace = ""
	rv.APIVersion, rv.Kind = tokenReviewKind.GroupVersion().String(), tokenReviewKind.Kind
	if rv.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	a := authn()
	if a == nil {
		return rv, nil
	}
	auds := rv.Spec.Audiences
	if len(auds) == 0 {
		auds = a.APIAudiences()
	}
	resp, ok, err := a.ReviewToken(r.Context(), rv.Spec.Token, auds)
	rv.Status.Authenticated = ok
	if err != nil {
		rv.Status.Error = err.Error()
	}
	if len(auds) > 0 && resp != nil && len(authenticator.Audiences(auds).Intersect(resp.Audiences)) == 0 {
		return nil, apierrors.NewInternalError(errors.New("error validating audiences"))
	}
	if resp != nil && resp.User != nil {
		rv.Status.User = authenticationv1.UserInfo{
			Username: resp.User.GetName(),
			UID:      resp.User.GetUID(),
			Groups:   resp.User.GetGroups(),
			Extra:    map[string]authenticationv1.ExtraValue{},
		}
		for k, v := range resp.User.GetExtra() {
			rv.Status.User.Extra[k] = v
		}
		rv.Status.Audiences = resp.Audiences
	}
	return rv, nil
}

// decodeTokenReview decodes a create body as kube-apiserver's create
// handler does, with its messages: the body's apiVersion and kind (the
// endpoint's when missing) must be authentication.k8s.io/v1 TokenReview,
// and unknown or duplicate fields are warnings, errors or nothing as
// ?fieldValidation= says (Warn by default).
func decodeTokenReview(w http.ResponseWriter, r *http.Request, body []byte) (*authenticationv1.TokenReview, error) {
	directive := r.URL.Query().Get("fieldValidation")
	switch directive {
	case "":
		directive = metav1.FieldValidationWarn
	case metav1.FieldValidationIgnore, metav1.FieldValidationWarn, metav1.FieldValidationStrict:
	default:
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "",
			field.ErrorList{field.NotSupported(field.NewPath("fieldValidation"), directive, []string{"", metav1.FieldValidationIgnore, metav1.FieldValidationStrict, metav1.FieldValidationWarn})})
	}
	var tm struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type TokenReview): couldn't get version/kind; json parse error: %v (%s)", err, summarize(body)))
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if tm.APIVersion == "" {
		gvk.Group, gvk.Version = tokenReviewKind.Group, tokenReviewKind.Version
	}
	if gvk.Kind == "" {
		gvk.Kind = tokenReviewKind.Kind
	}
	cannot := func(err error) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a TokenReview: %v", gvk.Kind, gvk.Version, err))
	}
	switch {
	case gvk == tokenReviewKind:
	case gvk.GroupKind() == tokenReviewKind.GroupKind() && gvk.Version == "v1beta1":
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), tokenReviewKind.GroupVersion()))
	default:
		if obj, err := request.Scheme().New(gvk); err == nil {
			return nil, cannot(fmt.Errorf("converting (%v) to (authentication.TokenReview): unknown conversion", reflect.TypeOf(obj).Elem()))
		}
		return nil, cannot(runtime.NewNotRegisteredErrForKind("pkg/runtime/scheme.go:111", gvk))
	}
	rv := &authenticationv1.TokenReview{}
	strict, err := kjson.UnmarshalStrict(body, rv, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, cannot(err)
	}
	if len(strict) > 0 {
		switch directive {
		case metav1.FieldValidationStrict:
			return nil, cannot(runtime.NewStrictDecodingError(strict))
		case metav1.FieldValidationWarn:
			for _, e := range strict {
				request.AddWarning(w, e.Error())
			}
		}
	}
	return rv, nil
}

// summarize shows the start of a body that does not decode, as
// Kubernetes' create handler does: JSON objects as text, the rest in hex.
func summarize(b []byte) string {
	const limit = 30
	switch {
	case len(b) == 0:
		return "<empty>"
	case b[0] == '{':
		if len(b) > limit {
			return string(b[:limit]) + " ..."
		}
		return string(b)
	case len(b) > limit:
		return hex.EncodeToString(b[:limit]) + " ..."
	}
	return hex.EncodeToString(b)
}
